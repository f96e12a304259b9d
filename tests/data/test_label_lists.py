"""bert_tf.data.label_lists: one rule for every label list (classifier tsv, NER, export)."""
import pytest

from bert_tf.data import label_lists


def test_labels_round_trip_exactly_and_blank_lines_are_skipped(tmp_path):
    path = str(tmp_path / label_lists.FILE_NAME)
    labels = ["neg", "pos ", "B-PER", "very good", "É"]
    label_lists.write(path, labels)
    assert label_lists.read(path) == labels
    (tmp_path / "crlf.txt").write_bytes(b"a\r\n\r\nb c\r\n\n")
    assert label_lists.read(str(tmp_path / "crlf.txt")) == ["a", "b c"]


def test_bad_lists_are_refused_naming_where_they_come_from(tmp_path):
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(ValueError, match=r"empty\.txt holds no labels"):
        label_lists.read(str(tmp_path / "empty.txt"))
    (tmp_path / "twice.txt").write_text("O\nB-X\nO\n")
    with pytest.raises(ValueError, match=r"twice\.txt repeats O"):
        label_lists.read(str(tmp_path / "twice.txt"))
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        label_lists.read(str(tmp_path / "missing.txt"))
    for bad in ("", "a\nb"):
        with pytest.raises(ValueError, match="labels must be non-empty, on one line"):
            label_lists.write(str(tmp_path / "out.txt"), ["ok", bad])
    assert not (tmp_path / "out.txt").exists()


def test_command_line_lists(tmp_path):
    assert label_lists.parse("O, B-PER,I-PER") == ["O", "B-PER", "I-PER"]
    with pytest.raises(ValueError, match="--label_list has an empty label"):
        label_lists.parse("O,,B")
    with pytest.raises(ValueError, match="--label_list repeats O"):
        label_lists.parse("O,B-X,O")
    (tmp_path / "labels.txt").write_text("x\ny\n")
    assert label_lists.resolve(str(tmp_path / "labels.txt")) == ["x", "y"]
    assert label_lists.resolve("0,1") == ["0", "1"] and label_lists.resolve((3, 4)) == ["3", "4"]
    assert label_lists.resolve(None) is None
    with pytest.raises(ValueError, match="The label list repeats 3"):
        label_lists.resolve([3, 3])


def test_a_training_runs_labels_are_kept(tmp_path):
    assert label_lists.saved(str(tmp_path)) == (str(tmp_path / "label_list.txt"), None)
    label_lists.check_unchanged(["a"], "--label_list", "unused", None)
    label_lists.write(str(tmp_path / "label_list.txt"), ["a", "b"])
    path, saved = label_lists.saved(str(tmp_path))
    assert saved == ["a", "b"]
    label_lists.check_unchanged(["a", "b"], "--label_list", path, saved)
    with pytest.raises(ValueError, match=r"--label_list has the labels \['b', 'a'\], which differs .* lists the "
                                         r"labels \['a', 'b'\]"):
        label_lists.check_unchanged(["b", "a"], "--label_list", path, saved)


def test_a_missing_label_file_and_an_empty_value_name_the_flag(tmp_path):
    missing = str(tmp_path / "labels.txt")
    with pytest.raises(FileNotFoundError, match=rf"--label_list={missing}: no such file"):
        label_lists.resolve(missing)
    for empty in ("", " "):
        with pytest.raises(ValueError, match="--label_list is empty"):
            label_lists.resolve(empty)
