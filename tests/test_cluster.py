"""Training on a Dask cluster (issue 16): CoCoA+ rounds, exact local solver, deterministic,
a killed worker's tasks re-run to the same model."""

import os
import signal
import threading

import numpy as np
import pytest

import streamwww as sw
from streamwww.engine.cocoa import partition_shards
from streamwww.io import write_store

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 6)).astype(np.float32)
    y = (X[:, :3].argmax(1) + (rng.random(240) < 0.15)) % 3
    return write_store(tmp_path_factory.mktemp("cluster") / "s.zarr", X, y, shard_rows=30)


KW = dict(C=[0.5, 2.0], tol=0, random_state=1, device="cpu")


def test_partitions_are_balanced_and_a_pure_function_of_sizes_and_seed():
    rows = [30, 30, 30, 30, 30, 30, 30, 10]
    p = partition_shards(rows, 3, seed=5)
    assert p == partition_shards(rows, 3, seed=5) and sorted(s for q in p for s in q) == list(range(8))
    loads = [sum(rows[s] for s in q) for q in p]
    assert max(loads) - min(loads) <= 30
    assert partition_shards(rows, 1, seed=5) == [tuple(range(8))]
    with pytest.raises(ValueError, match="partitions"):
        partition_shards(rows, 9, seed=5)


def test_one_partition_is_the_sequential_model_bitwise(client, store):
    """With objectives every epoch (a round's task sweeps its rows at W_t and then trains them
    with those sets, as one process does) one partition trains the sequential epochs."""
    seq = sw.train(store, max_iter=5, eval_every=1, **KW)
    k1 = sw.train(store, client=client, partitions=1, max_iter=5, eval_every=1, **KW)
    for a, b in zip(seq, k1):
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
        assert a.n_iter_ == b.n_iter_ == 5
        assert b.history_[-1]["primal"] == pytest.approx(a.history_[-1]["primal"], rel=1e-12)


def test_pipelined_rounds_sweep_beside_the_training_and_reach_the_optimum(client, store):
    """On the "auto" schedule with shrinking, a round's sweep of W_t (certificate and sets) is
    a task of its own, run beside the round's training, which shrinks with the sets of
    W_{t-1}: deterministic, the dual monotone, and at a tight tolerance the optimum of one
    process (primal to 1e-6 relative)."""
    kw = dict(C=0.05, tol=4e-7, max_iter=5000, random_state=1, device="cpu")
    one = sw.train(store, **kw)
    with distributed.get_task_stream(client) as ts:
        a = sw.train(store, client=client, partitions=1, **kw)
    keys = [str(t["key"]) for t in ts.data]
    assert sum("-cert-" in k for k in keys) >= a.n_iter_ - 1  # a sweep per training round
    b = sw.train(store, client=client, partitions=1, **kw)
    assert a.converged_ and np.array_equal(a.coef_, b.coef_) and a.n_iter_ == b.n_iter_
    duals = [h["dual"] for h in a.history_]
    assert all(d1 >= d0 - 1e-12 * abs(d0) for d0, d1 in zip(duals, duals[1:]))
    assert a.history_[-1]["primal"] == pytest.approx(one.history_[-1]["primal"], rel=1e-6)
    with distributed.get_task_stream(client) as ts_fused:
        fused = sw.train(store, client=client, partitions=1, eval_every=1, **kw)
    assert ts_fused.data and not any("-cert-" in str(t["key"]) for t in ts_fused.data)  # one task a round
    assert fused.converged_ and not np.array_equal(fused.coef_, a.coef_)  # other sets, another path


def test_two_partitions_deterministic_monotone_and_certified(client, store):
    a = sw.train(store, client=client, partitions=2, max_iter=6, **KW)
    b = sw.train(store, client=client, partitions=2, max_iter=6, **KW)
    X, y = store.read_shards(list(range(store.n_shards)))
    for m, m2 in zip(a, b):
        assert np.array_equal(m.coef_, m2.coef_)
        duals = [h["dual"] for h in m.history_]
        assert all(d1 >= d0 - 1e-12 * abs(d0) for d0, d1 in zip(duals, duals[1:]))  # sigma' = K: monotone
        S = X @ m.coef_.T + m.intercept_
        H = np.maximum(0.0, 1.0 - (S[np.arange(len(y)), y][:, None] - S))
        H[np.arange(len(y)), y] = 0.0
        P = 0.5 * ((m.coef_ ** 2).sum() + (m.intercept_ ** 2).sum()) + m.C * H.sum()
        assert m.history_[-1]["primal"] == pytest.approx(P, rel=1e-9)  # the returned model is the certified one
        assert m.history_[-1]["primal"] >= m.history_[-1]["dual"]


def test_a_killed_worker_changes_nothing(client, store):
    ref = sw.train(store, client=client, partitions=2, max_iter=8, **KW)
    victim = sorted(client.run(os.getpid).values())[0]
    timers = []

    def kill_during_round_4(info):
        if info["epoch"] == 3:  # the certificate of round 3 arrives: round 4's tasks start now
            timers.append(threading.Timer(0.02, os.kill, (victim, signal.SIGKILL)))
            timers[-1].start()

    again = sw.train(store, client=client, partitions=2, max_iter=8, callback=kill_during_round_4, **KW)
    timers[0].join()
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()  # it did die (its nanny started a new one)
    for a, b in zip(ref, again):
        assert np.array_equal(a.coef_, b.coef_)


def test_a_large_W_scattered_and_lost_runs_the_round_again_with_W_in_its_tasks(client, store, monkeypatch,
                                                                                caplog):
    """A W above EMBED_BYTES is scattered to one worker; when the scatter fails, or the
    scattered W is lost with its worker, the round's tasks carry W themselves: same model."""
    from streamwww.engine import cocoa

    ref = sw.train(store, client=client, partitions=2, max_iter=4, **KW)
    monkeypatch.setattr(cocoa, "EMBED_BYTES", 0)
    real, calls = client.scatter, []

    def flaky(data, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise distributed.comm.core.CommClosedError("in <TCP (closed) ConnectionPool.scatter>: Stream is closed")
        fut = real(data, *args, **kwargs)
        if len(calls) == 3:  # its worker dies: the scattered W is gone
            client.cancel(fut)
        return fut

    monkeypatch.setattr(client, "scatter", flaky)
    with caplog.at_level("WARNING", logger="streamwww.engine.cocoa"):
        again = sw.train(store, client=client, partitions=2, max_iter=4, **KW)
    assert "scattering W failed" in caplog.text and "running it again with W inside" in caplog.text
    assert len(calls) >= 4
    for a, b in zip(ref, again):
        assert np.array_equal(a.coef_, b.coef_)


def test_cluster_options_are_checked(store, tmp_path):
    with pytest.raises(ValueError, match="partitions applies to cluster runs"):
        sw.train(store, partitions=2, max_iter=1, **KW)
    with pytest.raises(ValueError, match="store carries its own row weights"):
        sw.train(store, workers=1, sample_weight=np.ones(240), max_iter=1, **KW)
    with pytest.raises(ValueError, match="not both"):
        sw.train(store, client="tcp://127.0.0.1:1", workers=1, max_iter=1, **KW)
    with pytest.raises(ValueError, match="'workers' parameter"):
        sw.train(store, workers=0, max_iter=1, **KW)


def test_the_callback_gets_each_rounds_weights_on_a_cluster(client, store):
    """As in one process: ``info["weights"](j)`` is the j-th model's ``(coef, intercept)`` of
    the round reported (the model a run of that many rounds returns), during the callback only;
    ``rows_per_s`` is there too, and ``progress`` gets each round's rows."""
    kw = dict(client=client, partitions=2, eval_every=1, **KW)
    seen, kept, speeds, rows = {}, [], [], []

    def cb(info):
        seen[info["epoch"]] = [info["weights"](j) for j in range(len(info["models"]))]
        kept.append(info["weights"])
        speeds.append(info["rows_per_s"])

    sw.train(store, max_iter=3, callback=cb, progress=lambda e, done, n, r: rows.append(r), **kw)
    assert sorted(seen) == [1, 2, 3]
    assert all(np.isfinite(v) and v > 0 for v in speeds), speeds
    assert rows[:3] == [store.n_rows] * 3
    for j, m in enumerate(sw.train(store, max_iter=2, **kw)):
        coef, intercept = seen[2][j]
        assert np.array_equal(coef, m.coef_) and np.array_equal(intercept, m.intercept_)
    with pytest.raises(RuntimeError, match="valid only while the callback"):
        kept[0](0)


class _Stop(Exception):
    pass


def _train_stopped_at_round(t: int, store, **kw) -> None:
    """``train`` whose driver dies (an exception from its callback) when round ``t``'s certificate arrives."""
    def stop(info):
        if info["epoch"] == t:
            raise _Stop
    with pytest.raises(_Stop):
        sw.train(store, callback=stop, **kw)


def test_checkpoint_resume_after_killing_the_driver_is_bitwise(client, store, tmp_path):
    """A cluster run commits after every round; a driver killed mid-run (here: interrupted by
    its callback after round 3) resumes to the undisturbed run's model, bitwise."""
    kw = dict(client=client, partitions=2, max_iter=7, **KW)
    ref = sw.train(store, **kw)

    ck = tmp_path / "ck"
    _train_stopped_at_round(3, store, checkpoint_dir=ck, model_out=tmp_path / "m.npz", **kw)
    manifest = __import__("json").loads((ck / "manifest.json").read_text())
    assert manifest["run"]["partitions"] == 2 and manifest["cursor"]["pos"] == 0
    assert 1 <= manifest["cursor"]["epoch"] <= 3
    resumed = sw.resume(ck, client=client)
    for a, b in zip(ref, resumed):
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
        assert a.n_iter_ == b.n_iter_
    files = sorted(p.name for p in tmp_path.glob("m-C*.npz"))
    assert files == ["m-C0.5.npz", "m-C2.npz"]  # resume writes the model files train was given
    again = sw.resume(ck, client=client)  # finished: nothing trains, same models
    assert all(np.array_equal(a.coef_, b.coef_) for a, b in zip(ref, again))


def test_the_line_search_step_maximizes_the_dual_on_the_segment():
    from streamwww.engine.cocoa import line_search

    rng = np.random.default_rng(7)
    W, delta = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 4))
    beta_sum, local_sum = rng.uniform(0, 5, 3), rng.uniform(0, 5, 3)
    local_sum[2] = beta_sum[2] + 1e3  # a step that would go past 1: clipped
    gamma = line_search(W, delta, beta_sum, local_sum, np.array([0, 1, 2]))
    grid = np.linspace(0.0, 1.0, 2001)
    for m in range(3):
        gain = grid * (local_sum[m] - beta_sum[m] - (W[m] * delta[m]).sum()) - grid ** 2 * (delta[m] ** 2).sum() / 2
        best = grid[np.argmax(gain)]
        assert 0.0 <= gamma[m] <= 1.0 and abs(gamma[m] - best) <= 1e-3
    assert gamma[2] == 1.0
    assert line_search(W, delta, beta_sum, local_sum, np.array([1]))[[0, 2]].tolist() == [1.0, 1.0]  # not trained


def test_scaled_rounds_resume_bitwise(client, store, tmp_path, caplog):
    """K = 2: a round whose step the line search scaled (gamma < 1) leaves beta_{t+1} unwritten
    (the next round's tasks mix and write it), so the checkpoint stays at the last state
    written (W_t and beta_t); a run stopped after such a round resumes from there to the
    undisturbed model, bitwise."""
    kw = dict(client=client, partitions=2, max_iter=8, **KW)
    with caplog.at_level("DEBUG", logger="streamwww.engine.cocoa"):
        ref = sw.train(store, **kw)
    steps = [float(v) for r in caplog.records if ": steps [" in r.getMessage()
             for v in r.getMessage().split("[")[1].rstrip("]").split()]
    assert steps and all(0.0 <= g <= 1.0 for g in steps) and min(steps) < 1.0
    behind = 0
    for stop in range(2, 8):
        ck = tmp_path / f"ck{stop}"
        _train_stopped_at_round(stop, store, checkpoint_dir=ck, **kw)
        man = __import__("json").loads((ck / "manifest.json").read_text())
        behind += man["cursor"]["epoch"] < stop  # the round before the stop was scaled
        resumed = sw.resume(ck, client=client)
        for a, b in zip(ref, resumed):
            assert np.array_equal(a.coef_, b.coef_) and a.n_iter_ == b.n_iter_
    assert behind >= 1


def test_cluster_checkpoint_continues_in_one_process_and_vice_versa(client, store, tmp_path):
    """Another engine or another K continues correctly from the stored beta (not bitwise):
    both certify a relative gap of 1e-4, so their primal values agree to about that."""
    tight = dict(C=0.05, tol=1e-4, max_iter=1000, random_state=1, device="cpu")
    ref = sw.train(store, **tight)
    ck = tmp_path / "ck"
    sw.train(store, client=client, partitions=2, checkpoint_dir=ck, **{**tight, "max_iter": 4})
    one = sw.resume(ck, max_iter=1000, partitions=1)  # in this process
    assert one.converged_ and one.n_iter_ > 4
    np.testing.assert_allclose(one.history_[-1]["primal"], ref.history_[-1]["primal"], rtol=5e-4)
    ck2 = tmp_path / "ck2"
    sw.train(store, checkpoint_dir=ck2, **{**tight, "max_iter": 4})  # sequential
    two = sw.resume(ck2, max_iter=1000, client=client, partitions=2)
    assert two.converged_ and two.n_iter_ > 4
    np.testing.assert_allclose(two.history_[-1]["primal"], ref.history_[-1]["primal"], rtol=5e-4)


def test_driver_sigkilled_then_resumed_is_bitwise(client, store, tmp_path):
    """The driver process of a cluster run (with its local cluster) is SIGKILLed after a
    few committed rounds; resume finishes with the undisturbed run's model, bitwise."""
    import json
    import subprocess
    import sys
    import time

    kw = dict(C=[0.5, 2.0], tol=0, random_state=1, device="cpu", max_iter=40)
    ref = sw.train(store, client=client, partitions=2, **kw)
    ck = tmp_path / "ck"
    script = (f"import streamwww as sw, warnings; warnings.simplefilter('ignore')\n"
              f"if __name__ == '__main__':\n"
              f"    sw.train({str(store.path)!r}, workers=2, partitions=2, checkpoint_dir={str(ck)!r}, **{kw!r})\n")
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            try:
                if json.loads((ck / "manifest.json").read_text())["cursor"]["epoch"] >= 5:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker processes
        proc.wait()
    epoch = json.loads((ck / "manifest.json").read_text())["cursor"]["epoch"]
    assert 5 <= epoch < 40
    resumed = sw.resume(ck, client=client)
    for a, b in zip(ref, resumed):
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)


def test_cross_validation_on_a_cluster(client, store, tmp_path):
    """WWClassifierCV / train(cv=) on a cluster: K = 1 is the in-process CV bitwise (with
    objectives after every epoch: fused rounds); a K = 2 run (pipelined rounds) interrupted
    after a round resumes to the undisturbed result."""
    cv_kw = dict(Cs=[0.5, 2.0], cv=3, tol=1e-2, max_iter=30, random_state=1, device="cpu")
    seq = sw.train(store, C=cv_kw["Cs"], **{k: v for k, v in cv_kw.items() if k != "Cs"}, eval_every=1)
    one = sw.WWClassifierCV(**cv_kw).fit(store, client=client, partitions=1, eval_every=1)
    assert np.array_equal(seq.cv_results_["mean_test_score"], one.cv_results_["mean_test_score"])
    assert np.array_equal(seq.coef_, one.coef_) and seq.best_C_ == one.best_C_

    kw = dict(C=[0.5, 2.0], cv=3, tol=1e-2, max_iter=30, random_state=1, device="cpu", client=client,
              partitions=2)
    ref = sw.train(store, **kw)

    ck = tmp_path / "ck"
    _train_stopped_at_round(3, store, checkpoint_dir=ck, **kw)
    resumed = sw.resume(ck, client=client)
    assert isinstance(resumed, sw.WWClassifierCV)
    assert np.array_equal(ref.cv_results_["mean_test_score"], resumed.cv_results_["mean_test_score"])
    assert np.array_equal(ref.coef_, resumed.coef_) and ref.best_C_ == resumed.best_C_


def test_two_workers_reach_the_one_process_optimum(client, store):
    """At a tight tolerance the K = 2 optimum is the single-process one (primal to 1e-6 relative)."""
    kw = dict(C=0.05, tol=4e-7, max_iter=5000, random_state=1, device="cpu")  # |P1 - P2| <= G1 + G2
    one = sw.train(store, **kw)
    two = sw.train(store, client=client, partitions=2, **kw)
    assert one.converged_ and two.converged_
    assert two.history_[-1]["primal"] == pytest.approx(one.history_[-1]["primal"], rel=1e-6)
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=1e-3, atol=1e-4)


def test_arrays_on_a_cluster(client, store):
    """(X, y) on a cluster: scattered row partitions, beta kept by the driver; K = 1 is the
    in-memory sequential model bitwise; K = 2 is deterministic, weighted, and certified."""
    X, y = store.read_shards(list(range(store.n_shards)))
    kw = dict(C=[0.5, 2.0], tol=0, max_iter=5, random_state=1, device="cpu")
    seq = sw.train((X, y), **kw, eval_every=1)  # (a cluster certifies every round under "auto")
    one = sw.train((X, y), client=client, partitions=1, **kw)
    for a, b in zip(seq, one):
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    w = np.random.default_rng(3).choice([0.0, 1.0, 2.0], size=len(y))
    a = sw.train((X, y), client=client, partitions=2, sample_weight=w, **kw)
    b = sw.train((X, y), client=client, partitions=2, sample_weight=w, **kw)
    for m, m2 in zip(a, b):
        assert np.array_equal(m.coef_, m2.coef_)
        duals = [h["dual"] for h in m.history_]
        assert all(d1 >= d0 - 1e-12 * abs(d0) for d0, d1 in zip(duals, duals[1:]))
    cv_kw = dict(Cs=[0.5, 2.0], cv=3, tol=1e-2, max_iter=20, random_state=1, device="cpu")
    cv_seq = sw.train((X, y), C=cv_kw["Cs"], **{k: v for k, v in cv_kw.items() if k != "Cs"}, eval_every=1)
    cv_one = sw.WWClassifierCV(**cv_kw).fit(X, y, client=client, partitions=1)
    assert np.array_equal(cv_seq.cv_results_["mean_test_score"], cv_one.cv_results_["mean_test_score"])
    assert np.array_equal(cv_seq.coef_, cv_one.coef_)
    unweighted = sw.train((X, y), client=client, partitions=2, **kw)
    assert not np.array_equal(a[0].coef_, unweighted[0].coef_)
    with pytest.raises(ValueError, match="without a checkpoint directory"):
        sw.train((X, y), client=client, checkpoint_dir="never-made", **kw)


def test_workers_keep_their_shards_for_the_run_then_release_them(client, store, tmp_path):
    """memory_budget applies per worker: the same model with shards kept or streamed every
    round, and after the run no worker holds a store."""
    kept = sw.train(store, partitions=2, client=client, max_iter=4, **KW)
    streamed = sw.train(store, partitions=2, client=client, max_iter=4, memory_budget=0, **KW)
    for a, b in zip(kept, streamed):
        assert np.array_equal(a.coef_, b.coef_)

    def held():
        from streamwww.engine import cocoa

        return len(cocoa._STORES)

    assert set(client.run(held).values()) == {0}
    with pytest.raises(ValueError, match="memory_budget"):
        sw.train(store, partitions=2, client=client, max_iter=1, memory_budget=-5, **KW)


def test_a_worker_keeps_decoded_shards_within_its_budget(store, tmp_path):
    from streamwww.engine import cocoa
    from streamwww.engine.run import solver_config
    from streamwww.estimator import WWClassifier

    cfg = solver_config(WWClassifier(C=1.0, random_state=0, device="cpu").get_params(), [1.0], 0)

    def spec(budget):
        return cocoa.PartitionSpec(store=str(store.path), fingerprint=str(store.fingerprint),
                                   shards=tuple(range(store.n_shards)), n_partitions=1, cfg=cfg,
                                   beta_root=str(tmp_path / f"b{budget}"), class_weights=None, folds=None,
                                   device="cpu", memory_budget=budget)

    from streamwww import _buffers

    W = np.zeros((1, store.n_features + 1, len(store.classes)))
    scopes = _buffers._scopes
    try:
        cocoa.round_task(spec(10**8), W, 0, np.arange(1))
        assert _buffers._scopes == scopes + 1  # the worker recycles its buffers from round to round
        opened = next(iter(cocoa._STORES.values()))
        # the decoded shards, and their row norms (8 bytes a row) kept with them
        assert opened.kept_bytes == sum(store.shard_nbytes(i) for i in range(store.n_shards)) + 8 * store.n_rows
        cocoa.round_task(spec(0), W, 0, np.arange(1))
        assert opened.kept_bytes == 0
    finally:
        cocoa.release_stores()
    assert cocoa._STORES == {} and _buffers._scopes == scopes  # ... until the run ends


def test_the_estimator_takes_a_client(client, store, tmp_path):
    """WWClassifier(client=): K = the client's workers for arrays, half of them for a store
    (pipelined rounds), the model of train(partitions=K); the client is shared by clone,
    left out of pickles and model files; a scheduler address works."""
    import pickle

    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    X, y = store.read_shards(list(range(store.n_shards)))
    labels = np.array(["a", "b", "c"])[y]
    kw = dict(C=0.5, tol=0, max_iter=4, random_state=1, device="cpu")
    est = sw.WWClassifier(client=client, **kw).fit(X, labels)
    ref = sw.train((X, labels), client=client, partitions=2, **kw)
    assert np.array_equal(est.coef_, ref.coef_) and est.n_iter_ == 4
    assert not np.array_equal(est.coef_, sw.WWClassifier(**kw).fit(X, labels).coef_)  # K = 2, not 1
    on_store = sw.WWClassifier(client=client, **kw).fit(store)
    assert np.array_equal(on_store.coef_, sw.train(store, client=client, partitions=1, **kw).coef_)
    fused = sw.WWClassifier(client=client, shrinking=False, **kw).fit(store)  # not pipelined: K = 2
    assert np.array_equal(fused.coef_, sw.train(store, client=client, partitions=2, shrinking=False, **kw).coef_)
    by_address = sw.WWClassifier(client=client.scheduler.address, **kw).fit(X, labels)
    assert np.array_equal(by_address.coef_, est.coef_)

    twin = clone(est)
    assert twin.client is client and twin.get_params()["C"] == 0.5 and not hasattr(twin, "coef_")
    back = pickle.loads(pickle.dumps(est))
    assert back.client is None and np.array_equal(back.predict(X), est.predict(X))
    sw.save_model(est, tmp_path / "m.npz")
    loaded = sw.load_model(tmp_path / "m.npz")
    assert loaded.client is None and np.array_equal(loaded.coef_, est.coef_)
    search = GridSearchCV(sw.WWClassifier(client=client, tol=0, max_iter=3, random_state=1, device="cpu"),
                          {"C": [0.5, 2.0]}, cv=2).fit(X, labels)
    assert search.best_estimator_.client is client
    with pytest.raises(ValueError, match="client"):
        sw.WWClassifier(client=3).fit(X, labels)


def test_a_scheduler_address_that_is_not_one_is_one_error_naming_it():
    """distributed's own parse error ("missing port number") says which option it is about."""
    from streamwww.engine.cluster import connect

    with pytest.raises(ValueError, match=r"cannot reach the Dask scheduler at 'nonsense': not an address "
                                         r"\(missing port number"):
        with connect("nonsense"):
            pass


def test_closing_a_local_cluster_of_the_run_keeps_the_nannys_kill_warning_out(caplog):
    """A worker slow to exit on a loaded machine is killed by its nanny with a warning that
    would end a CLI run's output; for the run's own cluster it loses nothing. Errors pass, and
    the logger's level is the user's again after the close."""
    import logging

    from streamwww.engine.cluster import _close_quietly

    class Cluster:
        def close(self):
            logging.getLogger("distributed.nanny").warning("Worker process still alive after 4.0 seconds, killing")
            logging.getLogger("distributed.nanny").error("an error")

    nanny = logging.getLogger("distributed.nanny")
    before = nanny.level
    with caplog.at_level(logging.INFO):
        _close_quietly(Cluster())
    assert [r.getMessage() for r in caplog.records if r.name == "distributed.nanny"] == ["an error"]
    assert nanny.level == before


def test_crammer_singer_on_a_cluster(client, store):
    """CS rounds: one partition is the sequential CS run bitwise; two reach its optimum."""
    kw = dict(KW, loss="cs")
    seq = sw.train(store, max_iter=5, eval_every=1, **kw)
    k1 = sw.train(store, client=client, partitions=1, max_iter=5, eval_every=1, **kw)
    for a, b in zip(seq, k1):
        assert type(b) is sw.CSClassifier
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    tight = dict(C=0.05, tol=4e-7, max_iter=5000, random_state=1, device="cpu", loss="cs")
    one = sw.train(store, **tight)
    two = sw.train(store, client=client, partitions=2, **tight)
    assert one.converged_ and two.converged_
    assert two.history_[-1]["primal"] == pytest.approx(one.history_[-1]["primal"], rel=1e-6)
    duals = [h["dual"] for h in two.history_]
    assert all(d1 >= d0 - 1e-12 * abs(d0) for d0, d1 in zip(duals, duals[1:]))
