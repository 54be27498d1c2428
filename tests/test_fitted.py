"""Models as plain records (streamwww.model.fitted): the command line's path without scikit-learn."""

import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import streamwww as sw
from streamwww.api import train_fitted
from streamwww.io import write_store
from streamwww import load_model, save_model
from streamwww.model.fitted import SETTINGS, FittedModel, model_params, model_settings

from .conftest import make_classification


def test_settings_are_the_estimators_parameters():
    assert tuple(k for k in sw.WWClassifier().get_params() if k != "client") == SETTINGS
    values = dict(C=0.5, class_weight={1: 2.0}, device="cpu", fit_intercept=False, gap_decay=0.1,
                  intercept_scaling=3.0, max_iter=7, random_state=4, shrinking=False, subproblem="shark",
                  tol=1e-5, verbose=1, warm_start=True, n_jobs=2, block_rows=4)
    assert model_settings(**values) == model_params(sw.WWClassifier(**values))
    assert list(model_settings(**values)) == list(model_params(sw.WWClassifier(**values)))
    with pytest.raises(TypeError, match=r"missing \['warm_start'\], unknown \['wrong'\]"):
        model_settings(**{k: v for k, v in values.items() if k != "warm_start"}, wrong=1)


@pytest.fixture
def store(tmp_path):
    X, y = make_classification(np.random.default_rng(5), n=300, d=8, k=3, dtype=np.float32)
    write_store(tmp_path / "s.zarr", X, np.array(["a", "b", "c"])[y], shard_rows=100)
    return tmp_path / "s.zarr", X


def test_a_loaded_model_predicts_without_the_training_engine(store, tmp_path):
    """``load_model`` returns a scikit-learn estimator; predicting with it needs neither the
    training engine nor its compiled kernels (Numba: 0.2 s of the import), which load when
    it fits."""
    path, X = store
    m = str(tmp_path / "m.npz")
    _run(f"main(['train', {str(path)!r}, '--checkpoint-dir', {str(tmp_path / 'ck')!r}, '--model-out', {m!r}, "
         "'--max-iter', '3', '--quiet'])")
    np.save(tmp_path / "X.npy", X)
    res = subprocess.run([sys.executable, "-c", "import sys\nimport numpy as np\nimport streamwww as sw\n"
                          f"model = sw.load_model({m!r})\n"
                          f"print(model.predict(np.load({str(tmp_path / 'X.npy')!r}))[:3].tolist())\n"
                          "print(sorted(k for k in ('numba', 'streamwww.engine') if k in sys.modules))"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout[-800:]
    import ast

    assert ast.literal_eval(res.stdout.strip().splitlines()[0]) == load_model(m).predict(X)[:3].tolist()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_records_are_the_models_train_returns(store, tmp_path):
    path, X = store
    kw = dict(C=[0.5, 2.0], random_state=3, max_iter=30, checkpoint_dir=None)
    models, fit = train_fitted(path, **kw)
    estimators = sw.train(path, **kw)
    assert [type(m) for m in models] == [FittedModel, FittedModel] and fit.seed == 3
    for rec, est in zip(models, estimators):
        assert rec.C == est.C and rec.params == model_params(est)
        np.testing.assert_array_equal(rec.coef_, est.coef_)  # the same run: bitwise
        np.testing.assert_array_equal(sw.WWClassifier.from_fitted(rec).predict(X), est.predict(X))
        assert [(h["epoch"], h["primal"], h["dual"]) for h in rec.history_] == \
            [(h["epoch"], h["primal"], h["dual"]) for h in est.history_]
        assert rec.n_features_in_ == est.n_features_in_ == 8 and rec.n_iter_ == est.n_iter_
    # a record and its estimator write the same model file
    save_model(models[1], tmp_path / "rec.npz")
    save_model(estimators[1], tmp_path / "est.npz")
    a, b = load_model(tmp_path / "rec.npz"), load_model(tmp_path / "est.npz")
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.get_params() == b.get_params() and list(a.classes_) == ["a", "b", "c"]
    with pytest.raises(TypeError, match="unexpected keyword argument.*'Cs'"):
        train_fitted(path, Cs=[1.0])
    with pytest.raises(NotFittedError):
        save_model(sw.WWClassifier(), tmp_path / "x.npz")


def _run(code: str) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-c", "import sys\nfrom streamwww.cli import main\n" + code],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def test_cli_train_and_resume_import_no_scikit_learn(store, tmp_path):
    """`streamwww train` and `resume` on a store write their model files from the records:
    importing scikit-learn (1.5 s of a 4.5 s dna run here) is left to Python users."""
    path, X = store
    ck, m = str(tmp_path / "ck"), str(tmp_path / "m.npz")
    res = _run(f"main(['train', {str(path)!r}, '--checkpoint-dir', {ck!r}, '--model-out', {m!r}, "
               "'--seed', '2', '--max-iter', '2', '--quiet'])\n"
               "print(sorted(k for k in ('sklearn', 'pandas') if k in sys.modules))")
    # not converged: one line of the command line's own, still without scikit-learn
    (warning,) = [line for line in res.stderr.splitlines() if "converge" in line]
    assert re.fullmatch(r"streamwww train: warning: did not converge after 2 epochs \(C=1\); relative duality "
                        r"gap \S+ > --tol 0.001; increase --max-iter or loosen --tol", warning), warning
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout[-800:]
    res = _run(f"main(['resume', {ck!r}, '--max-iter', '1000', '--quiet'])\n"
               f"main(['train', {str(path)!r}, '--checkpoint-dir', {ck + '2'!r}, '--model-out', "
               f"{m + '2'!r}, '--seed', '2', '--quiet'])\n"
               "print(sorted(k for k in ('sklearn', 'pandas') if k in sys.modules))")
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout[-800:]
    expected = sw.train(path, random_state=2, max_iter=1000)
    assert expected.converged_
    for out in (m, m + "2"):  # resumed and uninterrupted: the Python API's model, bitwise
        np.testing.assert_array_equal(load_model(out).coef_, expected.coef_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("k", [2, 3])
def test_a_model_files_record_predicts_as_its_estimator(tmp_path, k):
    """``load_fitted``'s record scores and predicts as ``load_model``'s estimator, bitwise
    (two classes: one score column), dense or sparse rows; wrong widths are refused."""
    import scipy.sparse as sp

    from streamwww.model.files import load_fitted

    X, y = make_classification(np.random.default_rng(k), n=200, d=6, k=k, dtype=np.float64)
    labels = np.array(["x", "y", "z"])[:k][y]
    save_model(sw.WWClassifier(C=1.0, random_state=0, max_iter=20).fit(X, labels), tmp_path / "m.npz")
    rec, est = load_fitted(tmp_path / "m.npz"), sw.load_model(tmp_path / "m.npz")
    assert type(rec) is FittedModel and rec.params == model_params(est)
    for rows in (X, sp.csr_matrix(X)):
        np.testing.assert_array_equal(rec.decision_function(rows), est.decision_function(rows))
        np.testing.assert_array_equal(rec.predict(rows), est.predict(rows))
    assert rec.decision_function(X).ndim == (1 if k == 2 else 2)
    with pytest.raises(ValueError, match="X has 5 features, but the model is expecting 6"):
        rec.predict(X[:, :5])


def test_cli_predict_evaluate_info_demo_import_no_scikit_learn(store, tmp_path):
    """`streamwww predict`, `evaluate` and `info` of a model file read it as a record: the
    estimator's labels and accuracy, without importing scikit-learn (a second or more);
    nor does `demo`."""
    path, X = store
    m, out = str(tmp_path / "m.npz"), str(tmp_path / "p.txt")
    est = sw.train(path, random_state=1, max_iter=1000, model_out=m)
    res = _run(f"main(['predict', {m!r}, {str(path)!r}, '--output', {out!r}])\n"
               f"main(['evaluate', {m!r}, {str(path)!r}])\n"
               f"main(['info', {m!r}])\n"
               "main(['demo', '--rows', '2000', '--test-rows', '500', '--features', '40', '--nnz-per-row', '6', "
               "'--classes', '3', '--shard-rows', '1000'])\n"
               "print(sorted(k for k in ('sklearn', 'pandas') if k in sys.modules))")
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout[-800:]
    with open(out) as f:
        assert f.read().split() == list(est.predict(path))
    accuracy = float(re.search(r"accuracy: ([0-9.]+) %", res.stdout).group(1))
    assert accuracy == pytest.approx(100 * est.score(path), abs=0.005)
