"""The format "serving" of `exporter.export`: `write` writes a SavedModel for TF Serving into the
directory it is given, with the signatures and assets of docs/serving.md: `serving_default` (the
model's int32 inputs -> its outputs, and a labelled head's labels), and for the tasks that take text
`serving_text` and `serving_text_pair`, which tokenize and pack in graph as the Python pipeline does
(with `doc_stride`, over windows pooled as run_classifier.py pools them; NER: with the entities).
"""
import tensorflow as tf

from bert_tf.data import lengths
from bert_tf.export import entities
from bert_tf.model import task_models
from bert_tf.text import core_ops, in_graph, packing, preprocessing

TEXT_OPS = ("tf_text", "core", "none")
# The text signatures' request limits (the defaults of this format's and tfhub's options): tokenization memory grows
# with a request's bytes (every byte may be a word).
MAX_TEXTS_PER_REQUEST = 1024
MAX_REQUEST_BYTES = 1 << 20
# With doc_stride: the tasks whose text signatures window and pool (`packing.WINDOW_POOLINGS`), and the windows a
# request may take by default, per text it may hold (max_texts_per_request).
WINDOWED_TASKS = ("classifier", "multi_label", "regression", "embedding")
WINDOWS_PER_TEXT = 4


def function_variables(concrete_functions):
    """The tf.Variables the concrete functions read, once each, in order: an export tracks these (not Keras 3's
    wrappers) so every loader restores them."""
    return list({id(v): v for fn in concrete_functions for v in fn.variables}.values())


class _ServingModule(tf.Module):
    """The signatures' computation: `model`'s outputs by name plus the spec's `label_output`, the argmax's label names
    (a multi-label model's: int32 [B, L], 1 at or above its threshold)."""

    def __init__(self, model, spec, vocab_file, labels, preprocessor=None, use_xla=False, seq_length_multiple=1,
                 window_pooling=None):
        super().__init__()
        # The Keras model is not tracked itself (lambdas and bound methods are not): the tf.Variables its traced
        # functions read are, as a flat list (`model_variables`, as keras.export does), so that the TF1 loader TF
        # Serving and saved_model_cli use restores every variable a signature reads.
        forward = lambda inputs: model(inputs, training=False)
        self._forward = tf.function(forward, jit_compile=True).__call__ if use_xla else forward
        if hasattr(model, "sentence_pooling"):  # windows pool the encoder's last layer (`window_outputs`)
            encode = lambda inputs: model.bert(inputs, training=False)["sequence_output"]
            self._encode = tf.function(encode, jit_compile=True).__call__ if use_xla else encode
            self._sentence_pooling = model.sentence_pooling.__call__
            self._cls_pooling = model.sentence_pooling.pooling == "cls"
        self.window_pooling = window_pooling
        self.seq_length_multiple = seq_length_multiple if use_xla else 1
        self.max_length = task_models.encoder_of(model).config.max_position_embeddings
        self.spec = spec
        self.output_names = task_models.output_names(model)
        self.sequence_outputs = task_models.sequence_outputs(model)
        if vocab_file:
            self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self.preprocessor = preprocessor
        self._labels = labels
        self._thresholds = getattr(model, "thresholds", None)  # a multi-label classifier's

    def outputs(self, inputs):
        result = self._forward_rounded(inputs) if self.seq_length_multiple > 1 else self._forward(inputs)
        out = {name: tf.identity(result[name], name=name) for name in self.output_names}
        return self._with_labels(out, out.get("logits"))

    def _with_labels(self, out, scores):
        """`out` with the spec's `label_output` of `scores`."""
        # constants of each function (a captured tensor would be an ONNX input)
        if self._thresholds is not None:
            out[self.spec.label_output] = tf.cast(out["probabilities"] >= tf.constant(self._thresholds, tf.float32),
                                                  tf.int32)
        elif self._labels is not None:
            labels = tf.constant(self._labels, tf.string)
            out[self.spec.label_output] = tf.gather(labels, tf.argmax(scores, axis=-1, output_type=tf.int32))
        return out

    def window_outputs(self, windows, text, num_windows):
        """Each text's outputs of the model on all `windows` at once (`preprocessing.pack_windows`:
        inputs, text of each window, num_windows of each text), pooled as `pool_document`
        (embeddings: as `embeddings.SentenceEncoder`), plus `num_windows` int32 [B]."""
        texts = tf.size(num_windows)
        inputs = {name: windows[name] for name in packing.INPUT_NAMES}
        if hasattr(self, "_encode"):
            out = {"embedding": self._pooled_embedding(self._encode(inputs), windows, text, texts)}
        else:
            result = {name: t for name, t in self._forward(inputs).items() if name in self.output_names}
            first = tf.cumsum(num_windows, exclusive=True)  # each text's window 0
            alone = num_windows == 1
            pooled = self._pooled(result, text, texts)
            out = {name: tf.identity(tf.where(tf.reshape(alone, [-1] + [1] * (t.shape.rank - 1)),
                                              tf.gather(result[name], first), pooled[name]), name=name)
                   for name, t in result.items()}
            out = self._with_labels(out, out.get("logits"))
        out["num_windows"] = tf.cast(num_windows, tf.int32)
        return out

    def _pooled(self, result, text, texts):
        """The classifier tasks' outputs pooled by `window_pooling` in log space, as `pool_document`."""
        taking_max = self.window_pooling == "max"

        def pool(values, lowest=False):
            if taking_max:
                return (tf.math.unsorted_segment_min if lowest else tf.math.unsorted_segment_max)(values, text, texts)
            most = tf.math.unsorted_segment_max(values, text, texts)
            total = tf.math.unsorted_segment_sum(tf.exp(values - tf.gather(most, text)), text, texts)
            count = tf.math.unsorted_segment_sum(tf.ones_like(text, tf.float32), text, texts)
            return most + tf.math.log(total) - tf.math.log(count)[:, None]  # log of the mean of exp(values)

        if "predictions" in result:
            predictions = (tf.math.unsorted_segment_max if taking_max else tf.math.unsorted_segment_mean)(
                result["predictions"], text, texts)
            return {"logits": predictions[:, None], "predictions": predictions}
        logits = tf.cast(result["logits"], tf.float32)
        if self._thresholds is not None:  # the largest p has the least 1 - p
            log_p, log_q = pool(tf.math.log_sigmoid(logits)), pool(tf.math.log_sigmoid(-logits), lowest=True)
            return {"logits": log_p - log_q, "probabilities": tf.exp(log_p)}
        log_p = pool(tf.nn.log_softmax(logits))
        log_p -= tf.reduce_logsumexp(log_p, axis=-1, keepdims=True)
        return {"logits": log_p, "probabilities": tf.exp(log_p)}

    def _pooled_embedding(self, sequence_output, windows, text, texts):
        """Each text's embedding: mean pooling over its tokens each counted once, or the mean of its windows' [CLS]
        vectors; then the model's own pooling layer."""
        x = tf.cast(sequence_output, tf.float32)
        if self._cls_pooling:
            pooled = tf.math.unsorted_segment_mean(x[:, 0], text, texts)
        else:
            mask = tf.cast(windows["pooling_mask"], tf.float32)[:, :, None]
            sums, counts = (tf.math.unsorted_segment_sum(tf.reduce_sum(t, axis=1), text, texts)
                            for t in (x * mask, mask))
            pooled = sums / tf.maximum(counts, 1e-9)
        return self._sentence_pooling(pooled[:, None], tf.ones_like(pooled[:, :1]))

    def _forward_rounded(self, inputs):
        """The model on `inputs` zero-padded to a multiple of `seq_length_multiple`, per-token outputs cut back."""
        sequence_inputs = [name for name in packing.INPUT_NAMES if name in inputs]
        length = tf.shape(inputs[sequence_inputs[0]], out_type=tf.int64)[-1]
        rounded = tf.maximum(length, preprocessing.longest_length([length], self.max_length, self.seq_length_multiple))
        result = self._forward({
            name: tf.pad(t, [[0, 0]] * (t.shape.rank - 1) + [[0, rounded - length]]) if name in sequence_inputs else t
            for name, t in inputs.items()})
        return {name: t[:, :length] if name in self.sequence_outputs else t
                for name, t in result.items() if name in self.output_names}

    def text_outputs(self, packed):
        """The outputs of the inputs `packed` from text, and those inputs."""
        out = self.outputs(packed)
        out.update({name: tf.identity(t) for name, t in packed.items()})
        return out

    def entity_outputs(self, text, packed, word_ids, starts, ends, max_seq_length):
        """`text_outputs`, and the entities of `text` (`entities.Entities`) from its words (`entities.pack`)."""
        out = self.text_outputs(packed)
        out.update(self.entities(text, word_ids, starts, ends, out["logits"], max_seq_length))
        return out


def tensor_specs(model):
    """The tensor signature's inputs: the model's Keras inputs, batch and sequence of any size."""
    return {name: tf.TensorSpec(x.shape, x.dtype, name=name) for name, x in model.input.items()}


def tensor_function(model, spec, labels=None):
    """`serving_default`'s computation as a tf.function of keyword `tensor_specs(model)`, for
    bert_tf.export.portable."""
    module = _ServingModule(model, spec, None, labels)
    return tf.function(lambda **inputs: module.outputs(inputs), autograph=False)


def write(out, model, spec, vocab_file, do_lower_case, max_seq_length, labels, labels_file, *, text_ops="tf_text",
          use_xla=False, pad_to_max_seq_length=None, seq_length_multiple=None,
          max_texts_per_request=MAX_TEXTS_PER_REQUEST, max_request_bytes=MAX_REQUEST_BYTES, doc_stride=0,
          window_pooling="mean", max_windows_per_request=None):
    """Writes `model` as a SavedModel into `out` (the arguments: `exporter`'s); -> its settings for the metadata. None:
    `pad_to_max_seq_length` the spec's `keeps_max_seq_length`, `max_windows_per_request` WINDOWS_PER_TEXT x
    max_texts_per_request."""
    if text_ops not in TEXT_OPS:
        raise ValueError(f"text_ops must be one of {TEXT_OPS}, got {text_ops!r}.")
    limits = dict(max_texts_per_request=max_texts_per_request, max_request_bytes=max_request_bytes)
    pad = bool(spec.keeps_max_seq_length if pad_to_max_seq_length is None else pad_to_max_seq_length)
    seq_length_multiple = lengths.SequenceLengths.for_run(pad, use_xla, seq_length_multiple).multiple
    has_text = text_ops != "none" and task_models.takes_text(model)
    windows = window_settings(spec, has_text, doc_stride, window_pooling, max_windows_per_request,
                              max_texts_per_request)
    tokenizer_class = in_graph.InGraphTokenizer if text_ops == "tf_text" else core_ops.CoreWordpieceTokenizer
    preprocessor = preprocessing.InGraphPreprocessor(  # its tokenizer checks each request against the limits first
        max_seq_length=max_seq_length, tokenizer=tokenizer_class(vocab_file, do_lower_case, **limits),
        pad_to_max_seq_length=pad, seq_length_multiple=seq_length_multiple) if has_text else None
    module = _ServingModule(model, spec, vocab_file, labels, None if windows else preprocessor, use_xla,
                            seq_length_multiple, windows.get("window_pooling"))
    if labels is not None:
        module.labels_asset = tf.saved_model.Asset(labels_file)
    signatures = {"serving_default": tf.function(
        lambda **inputs: module.outputs(inputs)).get_concrete_function(**tensor_specs(model))}
    module.model_variables = function_variables(signatures.values())  # the text signatures read the same ones
    if has_text:
        # Given as functions with input signatures, not traced here: tf.saved_model.save traces them in its own
        # context, where it also lists the preprocessor's functions (`encode`, `encode_pair`, the tokenizer's),
        # so each of those is traced, and written, once.
        text_a, text_b = (tf.TensorSpec([None], tf.string, name=name) for name in ("text_a", "text_b"))
        if windows:  # the tokenizer's function alone is written: the preprocessor's encode functions are not used
            module.tokenizer = tokenizer = preprocessor.tokenizer
            pack = lambda *texts: preprocessing.pack_windows(  # noqa: E731
                *(tokenizer.tokenize(text) for text in texts), max_seq_length=max_seq_length,
                doc_stride=doc_stride, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                max_windows=windows["max_windows_per_request"],
                pooling_mask=getattr(model, "pooling", None) == "mean", **preprocessor.padding)
            single = lambda text_a: module.window_outputs(*pack(text_a))  # noqa: E731
            pair = lambda text_a, text_b: module.window_outputs(*pack(text_a, text_b))  # noqa: E731
        else:
            single = lambda text_a: module.text_outputs(preprocessor.encode(text_a))  # noqa: E731
            pair = lambda text_a, text_b: module.text_outputs(preprocessor.encode_pair(text_a, text_b))  # noqa: E731
        if spec.name == "ner":  # a text's entities besides its tags (`entities`)
            module.entities = entities.Entities(labels)
            single = lambda text_a: module.entity_outputs(  # noqa: E731
                text_a, *entities.pack(preprocessor.tokenizer, text_a, max_seq_length, **preprocessor.padding),
                max_seq_length)
        signatures["serving_text"] = tf.function(single, input_signature=[text_a])
        signatures["serving_text_pair"] = tf.function(pair, input_signature=[text_a, text_b])
    tf.saved_model.save(module, out, signatures=signatures)
    return {"text_ops": text_ops if has_text else "none", "signatures": sorted(signatures), "use_xla": use_xla,
            "pad_to_max_seq_length": pad, "seq_length_multiple": seq_length_multiple,
            **({**limits, "doc_stride": doc_stride, **windows} if has_text else {}),
            **({"entity_types": module.entities.types} if hasattr(module, "entities") else {})}


def window_settings(spec, has_text, doc_stride, window_pooling, max_windows_per_request, max_texts_per_request):
    """`write`'s window metadata ({} for doc_stride 0). ValueError for a setting that does not apply to the task or
    export."""
    packing.check_doc_stride(doc_stride)
    if window_pooling not in packing.WINDOW_POOLINGS:
        raise ValueError(f"window_pooling must be one of {', '.join(packing.WINDOW_POOLINGS)}, got {window_pooling!r}.")
    if not doc_stride:
        if window_pooling != packing.WINDOW_POOLINGS[0] or max_windows_per_request is not None:
            raise ValueError("--window_pooling and --max_windows_per_request apply to the windows of --doc_stride, "
                             "which is 0 (texts cut to max_seq_length).")
        return {}
    if spec.name not in WINDOWED_TASKS:
        raise ValueError(f"--doc_stride windows the raw-text signatures of the {', '.join(WINDOWED_TASKS)} exports, "
                         f"not the {spec.name} task's.")
    if not has_text:
        raise ValueError("--doc_stride windows the raw-text signatures, which --text_ops=none leaves out.")
    pools = spec.name != "embedding"
    if window_pooling != packing.WINDOW_POOLINGS[0] and not pools:
        raise ValueError("--window_pooling applies to the classifier tasks: the embedding pools its windows by its "
                         "--pooling.")
    if max_windows_per_request is None and max_texts_per_request is not None:  # (None: no limit, as the others)
        max_windows_per_request = WINDOWS_PER_TEXT * max_texts_per_request
    if max_windows_per_request is not None and (isinstance(max_windows_per_request, bool) or not isinstance(
            max_windows_per_request, int) or max_windows_per_request < 1):
        raise ValueError(f"max_windows_per_request must be a positive integer, got {max_windows_per_request!r}.")
    return {"max_windows_per_request": max_windows_per_request,
            **({"window_pooling": window_pooling} if pools else {})}
