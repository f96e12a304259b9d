"""Wikipedia dump / plain text -> one sentence per line, blank line between documents."""
import glob
import os
import sys

import forkserver
import pytest

pytest.importorskip("mwparserfromhell")
pytest.importorskip("pysbd")

from bert_tf import resources  # noqa: E402
from bert_tf.data import corpus
from bert_tf.text import tokenization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WIKITEXT = """{{Infobox thing|name=X|born={{birth date|1900|1|1}}}}
[[File:X.jpg|thumb|A caption that is not text.]]
'''Albedo''' ({{IPAc-en|æ|l|ˈ|b|iː|d|oʊ}}) is the [[diffuse reflection|diffuse reflectivity]] of a [[surface]].<ref>{{cite web|title=Ref}}</ref> It is measured&nbsp;in per cent.<!-- hidden -->

== History ==
The term was coined by [[Johann Heinrich Lambert]] in 1760. See [http://example.com the site] too.
* A list item that is not a passage.
# Another one.
{| class="wikitable"
|-
| cell || cell
|}
__NOTOC__
[[Category:Physics]]
[[de:Albedo]]
"""


def _documents(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.endswith("\n") and not text.endswith("\n\n")
    return [block.split("\n") for block in text.rstrip("\n").split("\n\n")]


@pytest.fixture(scope="module")
def wiki_dump():
    return resources.gensim_test_file(resources.WIKI_DUMP)


def test_wikitext_to_paragraphs_keeps_only_text_passages():
    paragraphs = corpus.wikitext_to_paragraphs(WIKITEXT)
    assert paragraphs == [
        "Albedo is the diffuse reflectivity of a surface. It is measured in per cent.",
        "The term was coined by Johann Heinrich Lambert in 1760. See the site too.",
    ]


def test_sentence_splitter():
    split = corpus.sentence_splitter_for("pysbd")
    assert split("Mr. Smith went to Washington, D.C. in 1999. He stayed 2.5 days! Why?") == [
        "Mr. Smith went to Washington, D.C. in 1999.", "He stayed 2.5 days!", "Why?"]
    assert corpus.sentence_splitter_for("line")("  One. Two.  ") == ["One. Two."]
    with pytest.raises(ValueError):
        corpus.sentence_splitter_for("punkt")


def test_iter_wiki_pages_streams_the_real_dump(wiki_dump):
    pages = list(corpus.iter_wiki_pages(wiki_dump))
    assert len(pages) == 206
    articles = [p for p in pages if corpus.is_article(p)]
    assert len(articles) == 106
    assert articles[0].title == "Anarchism" and articles[0].ns == 0
    assert any(p.redirect for p in pages) and any(p.ns != 0 for p in pages)
    assert all(not p.redirect for p in articles)


def test_prepare_corpus_on_the_real_dump(tmp_path, wiki_dump, uncased_vocab_file):
    out = tmp_path / "sub" / "wiki.txt"
    num_documents, num_sentences = corpus.prepare_corpus(wiki_dump, str(out), max_documents=6, min_sentence_chars=5)
    documents = _documents(out)
    assert num_documents == len(documents) == 6
    assert num_sentences == sum(len(d) for d in documents) > 200
    assert documents[0][0].startswith("Anarchism is a political philosophy")
    for sentence in (s for d in documents for s in d):
        assert sentence == sentence.strip() and len(sentence) >= 5
        for junk in ("{{", "}}", "[[", "]]", "<ref", "&nbsp;", "thumb|", "'''", "\t"):
            assert junk not in sentence, sentence
    assert os.listdir(out.parent) == ["wiki.txt"]  # no temporary file left
    # The pre-training reader sees the same documents.
    from bert_tf.data.pretraining import instances
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=True)
    assert len(instances.read_documents([str(out)], tokenizer)) == 6
    # Workers give the same output, in the same order.
    parallel = tmp_path / "parallel.txt"
    corpus.prepare_corpus(wiki_dump, str(parallel), max_documents=6, min_sentence_chars=5, num_workers=2,
                          batch_size=2)
    assert parallel.read_bytes() == out.read_bytes()


def test_plain_text_inputs_and_globs(tmp_path):
    (tmp_path / "a.txt").write_text("First doc. It has two sentences.\nA second paragraph.\n\n\nSecond doc here.\n")
    (tmp_path / "b.txt").write_text("Third doc, one line.\nFourth doc, one line.\n")
    out = tmp_path / "out.txt"
    corpus.prepare_corpus(str(tmp_path / "a.txt"), str(out))
    assert _documents(out) == [["First doc.", "It has two sentences.", "A second paragraph."], ["Second doc here."]]
    corpus.prepare_corpus(str(tmp_path / "b.txt"), str(out), document_boundary="line", sentence_splitter="line")
    assert _documents(out) == [["Third doc, one line."], ["Fourth doc, one line."]]
    corpus.prepare_corpus(str(tmp_path / "[ab].txt"), str(out), document_boundary="file", min_document_sentences=4)
    assert _documents(out) == [["First doc.", "It has two sentences.", "A second paragraph.", "Second doc here."]]
    with pytest.raises(FileNotFoundError):
        corpus.prepare_corpus(str(tmp_path / "missing*.txt"), str(out))


def test_compressed_text_in_and_out(tmp_path):
    import bz2
    import gzip
    with bz2.open(tmp_path / "in.txt.bz2", "wt", encoding="utf-8") as f:
        f.write("Héllo wörld. Zweiter Satz hier.\n\nAnother document.\n")
    out = tmp_path / "out.txt.gz"
    assert corpus.prepare_corpus(str(tmp_path / "in.txt.bz2"), str(out)) == (2, 3)
    with gzip.open(out, "rt", encoding="utf-8") as f:
        assert f.read() == "Héllo wörld.\nZweiter Satz hier.\n\nAnother document.\n"


def test_failed_write_leaves_nothing(tmp_path):
    def documents():
        yield ["One sentence."]
        raise RuntimeError("boom")
    out = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        corpus.write_documents(documents(), str(out))
    assert os.listdir(tmp_path) == []


def test_script(tmp_path, wiki_dump):
    out = tmp_path / "wiki.txt"
    proc = forkserver.run([sys.executable, os.path.join(REPO, "run_scripts", "prepare_corpus.py"),
                           f"--input_file={wiki_dump}", f"--output_file={out}", "--max_documents=2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(_documents(out)) == 2
    assert not glob.glob(str(tmp_path / "*tmp*"))
