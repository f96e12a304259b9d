"""benchmarks/finetune_benchmark.py: the data it builds (the news sentence pairs, the tsv files and their token
lengths); no timing is tested."""
import random

import benchmark_modules
import pytest

finetune = benchmark_modules.load("finetune_benchmark")

STORIES = [[f"Story {s} sentence {j}." for j in range(n)] for s, n in enumerate((2, 5, 3, 4, 6, 2, 3))]


def test_sentences_end_at_a_stop_before_a_capital_or_a_quote():
    text = ('Fires burn near Hill Top.  A blaze closed the Hume Highway! Why? "The falls have been isolated," she '
            'said. "Well, it is finished." Mr Howard arrived at 4:00pm. The U.S. team won 3.5 to 1.')
    assert finetune.split_sentences(text) == [
        "Fires burn near Hill Top.", "A blaze closed the Hume Highway!", "Why?",
        '"The falls have been isolated," she said.', '"Well, it is finished."', "Mr Howard arrived at 4:00pm.",
        "The U.S. team won 3.5 to 1."]


def test_a_text_without_a_stop_is_one_sentence_and_blank_is_none():
    assert finetune.split_sentences("no stop at the end ") == ["no stop at the end"]
    assert finetune.split_sentences(" \n") == []


def test_pairs_are_balanced_and_next_really_follows():
    rows = finetune.next_sentence_pairs(STORIES, 6, random.Random(0))
    assert sorted(label for label, _, _ in rows) == ["next"] * 6 + ["random"] * 6
    story_of = {sentence: s for s, story in enumerate(STORIES) for sentence in story}
    for label, a, b in rows:
        story = STORIES[story_of[a]]
        assert story.index(a) < len(story) - 1  # text_a always has a next sentence
        if label == "next":
            assert b == story[story.index(a) + 1]
        else:
            assert story_of[b] != story_of[a]
    assert len({a for _, a, _ in rows}) == len(rows)  # no text_a twice


def test_pairs_are_the_same_for_a_seed_and_other_for_another():
    pairs = [finetune.next_sentence_pairs(STORIES, 5, random.Random(seed)) for seed in (1, 1, 2)]
    assert pairs[0] == pairs[1] != pairs[2]


def test_too_few_pairs_are_an_error():
    with pytest.raises(ValueError, match="18 sentences that have a next one, fewer than 2 x 10 pairs"):
        finetune.next_sentence_pairs(STORIES, 10, random.Random(0))
    with pytest.raises(ValueError, match="two stories or more"):
        finetune.next_sentence_pairs(STORIES[1:2], 1, random.Random(0))


def test_train_and_dev_pairs_come_from_different_stories():
    train, dev = finetune.news_pairs(STORIES, 4, 2, seed=3)
    assert (len(train), len(dev)) == (8, 4)
    stories_of = [{sentence.split()[1] for _, a, b in rows for sentence in (a, b)} for rows in (train, dev)]
    assert not stories_of[0] & stories_of[1]
    assert finetune.news_pairs(STORIES, 4, 2, seed=3) == (train, dev)
    for seed in range(20):  # dev takes two stories at least, even where one holds its pairs
        finetune.news_pairs(STORIES, 4, 2, seed)


def test_the_news_stories_give_the_default_pairs():
    pytest.importorskip("gensim")
    stories = finetune.read_news_stories()
    assert len(stories) == 300
    assert sum(len(story) - 1 for story in stories) == 2381
    train, dev = finetune.news_pairs(stories, 800, 200, 12345)
    for rows, per_class in ((train, 800), (dev, 200)):
        assert [label for label, _, _ in rows].count("next") == per_class
        assert [label for label, _, _ in rows].count("random") == per_class
        assert all("\t" not in a + b and "\n" not in a + b for _, a, b in rows)


def test_the_pairs_tsv_reads_back_with_text_b_and_the_classifier_reads_it(tmp_path):
    rows = [("next", "A first one.", "A second one."), ("random", "Another.", "Elsewhere.")]
    finetune.write_pairs_tsv({"train": rows, "dev": rows[:1]}, str(tmp_path))
    assert finetune.read_tsv(str(tmp_path), "train") == rows
    assert finetune.read_tsv(str(tmp_path), "dev") == rows[:1]
    from bert_tf.tasks.classifier.processors import TsvProcessor

    examples = TsvProcessor().get_train_examples(str(tmp_path))
    assert [(e.label, e.text_a, e.text_b) for e in examples] == rows


def test_a_single_text_tsv_reads_back_without_text_b(tmp_path):
    (tmp_path / "dev.tsv").write_text("id\tlabel\ttext_a\n3\tfresh\tGood film.\n", encoding="utf-8")
    assert finetune.read_tsv(str(tmp_path), "dev") == [("fresh", "Good film.", None)]


def test_padding_shares():
    lengths = [10, 20, 30, 40]
    assert finetune.in_batches([0, 1, 2, 3, 4], 2) == [[0, 1], [2, 3], [4]]
    assert finetune.padding_share(lengths, [[0, 1], [2, 3]]) == pytest.approx(1 - 100 / 120)
    packed = {"train": [([1] * n, [0] * n) for n in lengths], "dev": [([1] * n, [0] * n) for n in (5, 50, 6, 40)]}
    s = finetune.length_summary(packed, 64, batch_size=2, eval_batch_size=2, window_batches=2)
    assert (s["train_mean"], s["train_max"], s["dev_mean"], s["dev_max"]) == (25, 40, 25.25, 50)
    assert s["padded"] == pytest.approx(1 - 201 / 8 / 64)
    assert s["train_cut"] == pytest.approx(1 - 100 / 120)
    assert s["eval_cut_file_order"] == pytest.approx(1 - 101 / 180)  # [5, 50], [6, 40]
    assert s["eval_cut_sorted"] == pytest.approx(1 - 101 / 112)  # [50, 40], [6, 5]


def test_the_sides_and_data_sets_parse():
    args = finetune.parse_args(["--data", "news_pairs", "--sides", "bert_tf,bert_tf_padded,torch,torch_padded",
                                "--max_seq_length", "128"])
    assert (args.data, args.max_seq_length) == ("news_pairs", 128)
    with pytest.raises(SystemExit):
        finetune.parse_args(["--sides", "torch,jax"])


def test_only_the_padded_bert_tf_side_pads_to_max_seq_length():
    args = finetune.parse_args(["--data", "reviews"])
    flags = {side: finetune.bert_tf_command(args, "r", "d", "o", 0, 1500, side) for side in ("bert_tf",
                                                                                            "bert_tf_padded")}
    assert "--pad_to_max_seq_length=False" in flags["bert_tf"]
    assert "--pad_to_max_seq_length=True" in flags["bert_tf_padded"]
