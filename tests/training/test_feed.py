import numpy as np
import tensorflow as tf
import toy_task

from bert_tf.model.task_models import BertClassifier
from bert_tf.training import distribute
from bert_tf.training.trainer import Trainer


def _trainer(output_dir, **settings):
    tf.keras.utils.set_random_seed(1)
    return Trainer(lambda: BertClassifier(toy_task.CONFIG, 2), toy_task.loss_fn, str(output_dir),
                   strategy=distribute.get_strategy("one_device"), learning_rate=1e-3, **settings)


def _batches(iterator, n):
    return [tf.nest.map_structure(lambda t: t.numpy(), next(iterator)) for _ in range(n)]


def test_a_loop_reads_the_batches_of_the_updates_it_runs_and_no_more(tmp_path):
    """7 updates in loops of 3, 3 and 1 (and the untimed call of 0 updates that readies the loop): each loop
    fetches its next update's batches while one runs, yet the run's iterator stands at the 8th batch, as the
    checkpoint saves it."""
    trainer = _trainer(tmp_path, iterations_per_loop=3)
    trainer.train(toy_task.dataset_fn, 16, 7, 0, seed=5)
    assert trainer.step == 7
    expected = _batches(iter(toy_task.dataset_fn(16, None, 5)), 8)[7]
    got = _batches(trainer.iterator, 1)[0]
    tf.nest.map_structure(np.testing.assert_array_equal, got, expected)


def test_the_next_batches_are_fetched_while_the_update_runs(tmp_path):
    """In the training loop's body the fetch of the next update's batches (a cond holding IteratorGetNext) depends
    on the loop counter, the iterator and the current batches only: nothing orders it after the update."""
    trainer = _trainer(tmp_path)
    trainer._start(toy_task.dataset_fn, 16, 4, 0, seed=1)
    graph = trainer._train_loop().get_concrete_function(tf.TensorSpec([], tf.int32)).graph
    functions = {f.signature.name: f for f in graph.as_graph_def().library.function}
    fetches = []
    for function in functions.values():
        nodes = {node.name: node for node in function.node_def}
        for node in nodes.values():
            branch = functions.get(node.attr["then_branch"].func.name)
            if branch and any(n.op == "IteratorGetNext" for n in branch.node_def):
                fetches.append((function.signature.name, nodes, node))
    assert len(fetches) == 1 and fetches[0][0].startswith("while_body")
    _, nodes, fetch = fetches[0]
    ancestors, todo = set(), [fetch.name]
    while todo:
        node = nodes.get(todo.pop().lstrip("^").split(":")[0])
        if node is not None and node.name not in ancestors:
            ancestors.add(node.name)
            todo.extend(node.input)
    assert {nodes[name].op for name in ancestors} <= {"If", "Less", "AddV2", "Const", "Identity"}, \
        sorted(nodes[name].op for name in ancestors)
    assert not any(i.startswith("^") for i in fetch.input)


def test_empty_batches_have_the_input_structure(tmp_path):
    """What a loop of no update carries: the batches' structure and dtypes, unknown dimensions 0."""
    dataset = tf.data.Dataset.from_tensor_slices(({"ids": np.zeros((4, 3), np.int32)},
                                                   {"w": np.ones(4, np.float32)})).batch(2)
    trainer = _trainer(tmp_path)
    trainer.iterator = iter(dataset)
    (features, labels), = trainer._empty()
    assert features["ids"].shape == (0, 3) and features["ids"].dtype == tf.int32
    assert labels["w"].shape == (0,) and labels["w"].dtype == tf.float32
    (features, labels), = trainer._fetch()
    np.testing.assert_array_equal(labels["w"], [1.0, 1.0])
    assert trainer._distribute([(features, labels)])[0]["ids"].shape == (2, 3)
