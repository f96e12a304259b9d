"""Data: `records` (the TFRecord schemas, one writer and one reader each), `lengths` (batches as long as their
texts), `label_lists` (label_list.txt and --label_list), `corpus` (raw text and Wikipedia dumps -> documents), `vocab`
(WordPiece vocabularies) and `pretraining` (create_pretraining_data: instances, wire format, shards, Beam; reading the
records, dynamic masking). Files themselves: `bert_tf.fileio`."""
