"""benchmarks/finetune_benchmark.py: the data it builds (the news sentence pairs, the tsv files and their token
lengths); no timing is tested."""
import collections
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
    finetune.write_tsv({"train": rows, "dev": rows[:1]}, str(tmp_path))
    assert finetune.read_tsv(str(tmp_path), "train") == rows
    assert finetune.read_tsv(str(tmp_path), "dev") == rows[:1]
    from bert_tf.tasks.classifier.processors import TsvProcessor

    examples = TsvProcessor().get_train_examples(str(tmp_path))
    assert [(e.label, e.text_a, e.text_b) for e in examples] == rows


def test_a_single_text_tsv_reads_back_without_text_b(tmp_path):
    (tmp_path / "dev.tsv").write_text("id\tlabel\ttext_a\n3\tfresh\tGood film.\n", encoding="utf-8")
    assert finetune.read_tsv(str(tmp_path), "dev") == [("fresh", "Good film.", None)]
    finetune.write_tsv({"train": [("a,b", "One.", None), ("", "Two.", None)]}, str(tmp_path))
    assert (tmp_path / "train.tsv").read_text(encoding="utf-8") == "id\tlabel\ttext_a\n0\ta,b\tOne.\n1\t\tTwo.\n"


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


# (title, categories, passages) of a made-up wiki: "p" articles are people, "c" countries (some Muslim-majority).
ARTICLES = [(f"{kind}{i}", cats, [f"{kind}{i} passage {j}" for j in range(n)]) for kind, i, cats, n in (
    [("p", i, ["births", "Mathematicians"] + ["deaths"] * (i % 2), 3 + i) for i in range(6)]
    + [("c", i, ["Republics", "Member states of the United Nations"] + ["Muslim-majority countries"] * (i < 2), 4)
       for i in range(4)]
    + [("o", i, [f"Topic {i}"], 5) for i in range(6)])]


def test_categories_drop_years_centuries_commas_and_tracking_ones():
    text = ("Text [[Category:1809 births]] [[ category : 19th-century American politicians|Lincoln]] "
            "[[Category:Articles containing video clips]] [[Category:Scattering, absorption]] [[Category:322 BC]] "
            "[[Category:World Digital Library related]] [[Category:1865 deaths]] [[Category:320s BC deaths]]")
    assert finetune.article_categories(text) == ["American politicians", "Scattering absorption", "births", "deaths"]


def test_the_wiki_passages_split_by_article_with_their_frequent_categories():
    train, dev, labels = finetune.wiki_categories(ARTICLES, 4, 4, 2, seed=5)
    assert labels == ["Mathematicians", "Member states of the United Nations", "Republics", "births"]
    categories = {title: set(cats) for title, cats, _ in ARTICLES}
    titles = []
    for rows, per_article in ((train, 4), (dev, 2)):
        titles.append({text.split()[0] for _, text, _ in rows})
        for label, text, text_b in rows:  # each passage's labels: its article's among the frequent ones
            assert text_b is None and set(filter(None, label.split(","))) == categories[text.split()[0]] & set(labels)
        counts = collections.Counter(text.split()[0] for _, text, _ in rows)
        assert all(counts[title] == min(per_article, len(passages), finetune.WIKI_UNLABELLED if title[0] == "o"
                                        else len(passages)) for title, _, passages in ARTICLES if title in counts)
    assert not titles[0] & titles[1] and titles[0] | titles[1] == {title for title, _, _ in ARTICLES}
    assert all(any(label in categories[t] for t in titles[1]) for label in labels)  # every label in dev
    assert finetune.wiki_categories(ARTICLES, 4, 4, 2, seed=5) == (train, dev, labels)


def test_dev_takes_a_quarter_of_the_articles_and_at_most_half_of_a_labels():
    labels_of = [{"a"}] * 2 + [{"a", "b"}] * 4 + [{"c"}] * 3 + [set()] * 11
    for seed in range(10):
        train, dev = finetune.split_articles(labels_of, 0.25, random.Random(seed))
        assert sorted(train + dev) == list(range(20)) and len(dev) >= 5
        for label, count in (("a", 6), ("b", 4), ("c", 3)):
            assert 1 <= sum(label in labels_of[i] for i in dev) <= count // 2
    with pytest.raises(ValueError, match="No dev article for d: a label needs two articles or more"):
        finetune.split_articles(labels_of + [{"d"}], 0.25, random.Random(0))


def test_long_documents_put_their_articles_passage_after_a_news_lead():
    stories = [[f"Story {s} sentence {j} {'word ' * 20}." for j in range(3)] for s in range(5)]
    train, dev = finetune.long_documents(ARTICLES, stories, 4, 2, seed=1)
    kinds = {"p": "person", "c": "other", "o": "other"}  # no "place" article here
    titles = []
    for rows, per_class in ((train, 4), (dev, 2)):
        assert collections.Counter(label for label, _, _ in rows) == {"person": per_class, "other": per_class}
        for label, text, _ in rows:
            lead, passage = text.rsplit(" ", 3)[0], text.rsplit(" ", 3)[1:]
            assert lead.startswith("Story") and lead.endswith(".") and len(lead.split()) >= finetune.LEAD_WORDS
            assert passage[1:] == ["passage", passage[2]] and kinds[passage[0][0]] == label
        titles.append({text.rsplit(" ", 3)[1] for _, text, _ in rows})
    assert not titles[0] & titles[1]


def test_the_multi_label_sides_run_with_multi_label_and_read_comma_joined_labels():
    args = finetune.parse_args(["--data", "wiki_categories"])
    flags = {side: finetune.bert_tf_command(args, "r", "d", "o", 0, 700, side) for side in ("bert_tf",
                                                                                           "bert_tf_tuned")}
    assert "--multi_label" in flags["bert_tf"] and "--tune_thresholds" not in flags["bert_tf"]
    assert {"--multi_label", "--tune_thresholds"} <= set(flags["bert_tf_tuned"])
    assert "--multi_label" not in finetune.bert_tf_command(finetune.parse_args([]), "r", "d", "o", 0, 9, "bert_tf")
    assert finetune.metric_names("wiki_categories") == ("micro_f1", "macro_f1", "subset_accuracy")
    assert finetune.multi_hot(" b,a ,", ["a", "b", "c"]) == [1.0, 1.0, 0.0]
    assert finetune.multi_hot("", ["a"]) == [0.0]


def test_the_windows_sides_run_with_doc_stride_and_count_run_squads_windows():
    args = finetune.parse_args(["--data", "long_documents", "--doc_stride", "32"])
    flags = finetune.bert_tf_command(args, "r", "d", "o", 0, 700, "bert_tf_windows_max")
    assert {"--doc_stride=32", "--window_pooling=max"} <= set(flags)
    assert not any(f.startswith("--doc_stride") for f in finetune.bert_tf_command(args, "r", "d", "o", 0, 9,
                                                                                   "bert_tf"))
    # [CLS] + text + [SEP]: 126 text tokens fit in 128; windows start every min(stride, 126) tokens
    assert [finetune.num_windows(n, 128, 64) for n in (100, 128, 129, 256, 257, 300)] == [1, 1, 2, 3, 4, 4]
    assert finetune.num_windows(300, 128, 200) == 3
