"""Data: `records` (TFRecord schemas), `lengths` (batches as long as their texts), `label_lists`, `corpus` (text and
Wikipedia dumps -> documents), `vocab` (WordPiece vocabularies) and `pretraining` (its records, written and read).
Files themselves: `bert_tf.fileio`."""
