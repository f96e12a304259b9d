"""Pre-training corpora: a Wikipedia XML dump or plain text into create_pretraining_data.py's input format.

The format: one sentence per line, a blank line between documents. As the original BERT, only Wikipedia's text
passages are kept ("ignoring lists, tables, and headers"), with `mwparserfromhell` and `pysbd` (the `corpus`
extra). The dump is streamed in bounded memory; output is written atomically.
"""
import collections
import contextlib
import html
import itertools
import multiprocessing
import os
import re
import xml.etree.ElementTree as ET

from bert_tf import fileio

WikiPage = collections.namedtuple("WikiPage", ["title", "ns", "redirect", "text"])

# Tags whose contents are not running text.
_DROP_TAGS = frozenset([
    "ref", "references", "table", "gallery", "math", "chem", "ce", "timeline", "imagemap", "score", "graph",
    "syntaxhighlight", "source", "pre", "code", "nowiki", "noinclude", "includeonly", "onlyinclude", "templatedata",
    "mapframe", "maplink", "poem", "hiero", "inputbox", "categorytree", "div", "blockquote", "caption"])
# Wiki markup that starts a list item, a definition or a rule: the line is not a text passage.
_LIST_TAGS = frozenset(["li", "dt", "dd", "hr"])
_DROP_LINK_NAMESPACES = frozenset(["file", "image", "media", "category"])
_LINE_DROP = "\x00"  # marks a line that is not a text passage (list item, table row)
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_EMPTY_PARENS = re.compile(r"\(\s*(?:[,;:]\s*)*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:])")
_PAREN_SPACE = re.compile(r"\(\s*(?:[,;:]\s*)+")
_WHITESPACE = re.compile(r"\s+")
_INTERWIKI = re.compile(r"^[a-z]{2,3}(-[a-z]+)*:")


def iter_wiki_pages(path):
    """Yields every <page> of a MediaWiki XML dump (.xml, .bz2, .gz) as a WikiPage."""
    with fileio.open_file(path, "rb") as f:
        root = None
        for event, elem in ET.iterparse(f, events=("start", "end")):
            root = elem if root is None else root
            if event != "end" or elem.tag.rsplit("}", 1)[-1] != "page":
                continue
            title, ns, redirect, text = (elem.find("{*}" + name) for name in ("title", "ns", "redirect",
                                                                               "revision/{*}text"))
            yield WikiPage(title=title.text if title is not None else "",
                           ns=int(ns.text) if ns is not None and ns.text else 0,
                           redirect=redirect.get("title") if redirect is not None else None,
                           text=(text.text or "") if text is not None else "")
            root.clear()  # drops the finished page (and earlier siblings): memory stays bounded


def is_article(page):
    """A main-namespace page that is not a redirect and has text."""
    return (page.ns == 0 and page.redirect is None and bool(page.text)
            and not page.text.lstrip()[:9].upper().startswith("#REDIRECT"))


def _render(code, out):
    import mwparserfromhell.nodes as nodes
    for node in code.nodes:
        if isinstance(node, nodes.Text):
            out.append(str(node.value))
        elif isinstance(node, (nodes.Template, nodes.Heading, nodes.Comment, nodes.Argument)):
            continue
        elif isinstance(node, nodes.Wikilink):
            title = str(node.title).strip()
            namespace = title.lstrip(":").split(":", 1)[0].strip().lower() if ":" in title else ""
            if namespace in _DROP_LINK_NAMESPACES:
                continue
            if node.text is not None:
                _render(node.text, out)
            elif not _INTERWIKI.match(title):
                out.append(title.lstrip(":").split("#", 1)[0])
        elif isinstance(node, nodes.ExternalLink):
            if node.title is not None:
                _render(node.title, out)
        elif isinstance(node, nodes.HTMLEntity):
            out.append(node.normalize())
        elif isinstance(node, nodes.Tag):
            tag = str(node.tag).strip().lower()
            if tag in _DROP_TAGS:
                if tag == "table":
                    out.append(_LINE_DROP)
                continue
            if tag in _LIST_TAGS and node.wiki_markup:
                out.append(_LINE_DROP)
                continue
            if tag == "br":
                out.append(" ")
            elif node.contents is not None:
                _render(node.contents, out)


def wikitext_to_paragraphs(wikitext):
    """An article's text passages, one string per paragraph line: links and formatting reduced to their text, the
    rest (templates, tables, headings, list items, ...) dropped."""
    import mwparserfromhell
    out = []
    _render(mwparserfromhell.parse(wikitext, skip_style_tags=True), out)
    paragraphs = []
    for line in "".join(out).split("\n"):
        if _LINE_DROP in line:
            continue
        line = html.unescape(line.replace("'''", "").replace("''", ""))
        line = _MAGIC_WORD.sub("", line)
        line = _WHITESPACE.sub(" ", line).strip()
        if not line or line[0] in "|!{}[":
            continue
        line = _EMPTY_PARENS.sub("", line)
        line = _PAREN_SPACE.sub("(", line)
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", line)
        line = _WHITESPACE.sub(" ", line).strip()
        if line:
            paragraphs.append(line)
    return paragraphs


def sentence_splitter_for(kind="pysbd", language="en"):
    """A function splitting a paragraph into sentences: "pysbd" (rule-based) or "line" (the
    paragraph is one sentence)."""
    if kind == "line":
        return lambda paragraph: [paragraph.strip()] if paragraph.strip() else []
    if kind != "pysbd":
        raise ValueError(f"Unknown sentence splitter {kind!r} (pysbd or line).")
    try:
        import pysbd
    except ImportError:
        raise ImportError("The pysbd sentence splitter needs the `corpus` extra: "
                          "pip install pysbd") from None
    segmenter = pysbd.Segmenter(language=language, clean=False)

    def split(paragraph):
        paragraph = paragraph.strip()
        sentences = (s.strip() for s in segmenter.segment(paragraph)) if paragraph else ()
        return [_WHITESPACE.sub(" ", s) for s in sentences if s]
    return split


def iter_text_documents(path, document_boundary="blank_line"):
    """Yields a text file's documents as lists of lines; a document ends at a "blank_line", each "line" or the
    "file" (document_boundary)."""
    if document_boundary not in ("blank_line", "line", "file"):
        raise ValueError(f"Unknown document_boundary {document_boundary!r}.")
    with fileio.open_file(path, "r") as f:
        document = []
        for line in f:
            line = line.strip()
            if line:
                document.append(line)
            if document and (document_boundary == "line" or not line and document_boundary == "blank_line"):
                yield document
                document = []
        if document:
            yield document


def detect_format(path):
    """"wiki" for a MediaWiki XML dump (.xml, .xml.bz2, .xml.gz), else "text"."""
    name = path
    for suffix in fileio.COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return "wiki" if name.endswith(".xml") or ".xml-" in os.path.basename(name) else "text"


def iter_raw_documents(files, input_format="auto", document_boundary="blank_line"):
    """Yields ("wiki", wikitext) for each article of the dumps and ("text", paragraphs) for each text document."""
    for path in files:
        kind = detect_format(path) if input_format == "auto" else input_format
        if kind == "wiki":
            for page in iter_wiki_pages(path):
                if is_article(page):
                    yield ("wiki", page.text)
        elif kind == "text":
            for paragraphs in iter_text_documents(path, document_boundary):
                yield ("text", paragraphs)
        else:
            raise ValueError(f"Unknown input format {kind!r} (auto, wiki or text).")


_WORKER = {}


def _init_worker(splitter_kind, language, min_sentence_chars, min_document_sentences):
    _WORKER.update(splitter=sentence_splitter_for(splitter_kind, language),
                   shortest=max(1, min_sentence_chars), fewest=max(1, min_document_sentences))


def _process(raw):
    kind, payload = raw
    paragraphs = wikitext_to_paragraphs(payload) if kind == "wiki" else payload
    sentences = [s for paragraph in paragraphs for s in _WORKER["splitter"](paragraph) if len(s) >= _WORKER["shortest"]]
    return sentences if len(sentences) >= _WORKER["fewest"] else None


def iter_documents(files, input_format="auto", document_boundary="blank_line", sentence_splitter="pysbd",
                   language="en", min_sentence_chars=0, min_document_sentences=1, num_workers=1, batch_size=512):
    """Yields each document of the inputs, in order, as its list of sentences; num_workers > 1: a process pool,
    batch_size documents at a time per worker."""
    raw = iter_raw_documents(files, input_format, document_boundary)
    init_args = (sentence_splitter, language, min_sentence_chars, min_document_sentences)
    if num_workers <= 1:
        _init_worker(*init_args)
        for item in raw:
            document = _process(item)
            if document:
                yield document
        return
    with multiprocessing.get_context("spawn").Pool(num_workers, _init_worker, init_args) as pool:
        while True:
            batch = list(itertools.islice(raw, batch_size * num_workers))
            if not batch:
                break
            for document in pool.imap(_process, batch, chunksize=max(1, batch_size // 8)):
                if document:
                    yield document


def write_documents(documents, output_file, max_documents=None, progress=None):
    """Writes documents (lists of sentences) to output_file atomically in the module's format; returns (documents,
    sentences) written."""
    num_documents = num_sentences = 0
    with fileio.atomic_write(output_file, "w") as f:
        for document in documents:
            if max_documents is not None and num_documents >= max_documents:
                break
            if not document:
                continue
            if num_documents:
                f.write("\n")
            for sentence in document:
                f.write(sentence.replace("\n", " ") + "\n")
            num_documents += 1
            num_sentences += len(document)
            if progress is not None:
                progress.update(1)
    return num_documents, num_sentences


def prepare_corpus(input_patterns, output_file, max_documents=None, progress=False, **kwargs):
    """Converts the files matching input_patterns into output_file (kwargs: iter_documents'); returns
    (documents, sentences) written."""
    from tqdm import tqdm

    files = fileio.expand_patterns(input_patterns)
    with contextlib.closing(iter_documents(files, **kwargs)) as documents, \
            tqdm(total=max_documents, unit=" docs", desc="prepare_corpus", disable=not progress) as bar:
        return write_documents(documents, output_file, max_documents=max_documents, progress=bar)
