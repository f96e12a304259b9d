"""Data: `fileio` (file plumbing: atomic writes, compressed files, glob expansion), `records` (the TFRecord schemas,
one writer and one reader each), `corpus` (raw text and Wikipedia dumps -> documents), `vocab` (WordPiece
vocabularies) and `pretraining` (create_pretraining_data: instances, wire format, shards, Beam; dynamic masking)."""
