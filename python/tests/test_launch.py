"""Jobs this test starts itself (run it outside any launcher): a PE that dies, a job joined by a
unique id with no launcher, the README's example, and the library built on first use.
ROXRUN names the roxrun binary (else roxrun on PATH)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = os.path.join(REPO, "python")


def roxrun():
    r = os.environ.get("ROXRUN") or shutil.which("roxrun")
    if not r:
        pytest.fail("no roxrun: set ROXRUN or put it on PATH (go build -o roxrun ./cmd/roxrun)")
    return r


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ROX_PE", "RANK", "WORLD_SIZE", "PMIX_", "OMPI_", "SLURM_"))}
    e["PYTHONPATH"] = PYTHON
    e.setdefault("ROX_TIMEOUT", "20s")
    e.update(extra)
    return e


def script(tmp_path, body):
    p = tmp_path / "job.py"
    p.write_text(textwrap.dedent(body))
    return str(p)


def test_dead_pe_fails_the_others(tmp_path):
    # PE 2 exits between two barriers; the others' second barrier raises, naming it, and returns.
    p = script(tmp_path, """
        import os, roxamen as rx
        rx.init()
        rx.barrier_all()
        if rx.my_pe() == 2:
            os._exit(3)
        try:
            rx.barrier_all()
            print("PE", rx.my_pe(), "barrier returned")
        except rx.RoxamenError as e:
            print("PE", rx.my_pe(), "raised", e.kind, e)
    """)
    r = subprocess.run([roxrun(), "-n", "3", sys.executable, p], env=env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=90)
    assert r.returncode != 0, r.stdout
    for pe in (0, 1):
        line = [l for l in r.stdout.splitlines() if ("PE %d raised" % pe) in l]
        assert line and "PE_FAILED" in line[0] and "BarrierAll on PE %d" % pe in line[0] and "PE 2 exited with status 3" in line[0], r.stdout


def test_unique_id_without_launcher(tmp_path):
    # Two plain processes meet at an id drawn here; no launcher variable is set.
    sys.path.insert(0, PYTHON)
    import roxamen as rx
    uid = rx.get_unique_id()
    p = script(tmp_path, """
        import sys, numpy as np, roxamen as rx
        rx.init_with_unique_id(sys.argv[1], int(sys.argv[2]), 2)
        x = rx.zeros(3, np.int64)
        x[:] = rx.my_pe() + 1
        rx.allreduce(x, x, "sum")
        print("PE %d of %d: %s" % (rx.my_pe(), rx.n_pes(), x.tolist()))
        rx.finalize()
    """)
    procs = [subprocess.Popen([sys.executable, p, uid, str(r)], env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = [pr.communicate(timeout=90)[0] for pr in procs]
    for r, (pr, out) in enumerate(zip(procs, outs)):
        assert pr.returncode == 0 and "PE %d of 2: [3, 3, 3]" % r in out, out
    with pytest.raises(rx.RoxamenError) as e:
        rx.init_with_unique_id("no-token", 0, 1)
    assert e.value.kind == "BAD_ARGUMENT" and "is not TOKEN@HOST:PORT" in str(e.value)


def test_example_allreduce():
    r = subprocess.run([roxrun(), "-n", "4", sys.executable, os.path.join(REPO, "examples", "python", "allreduce.py")],
                       env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=90)
    assert r.returncode == 0, r.stdout
    for pe in range(4):
        assert "PE %d of 4: allreduce [6.0, 10.0, 14.0" % pe in r.stdout, r.stdout


def test_mpirun():
    # Open MPI's mpirun (PMIx under it): roxamen.init() finds the job as the Go runtime does.
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("no mpirun (Debian: apt-get install openmpi-bin)")
    args = [mpirun, "--oversubscribe", "-np", "4"]
    if os.geteuid() == 0:
        args.insert(1, "--allow-run-as-root")
    r = subprocess.run(args + [sys.executable, os.path.join(REPO, "examples", "python", "allreduce.py")],
                       env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    for pe in range(4):
        assert "PE %d of 4: allreduce [6.0, 10.0, 14.0" % pe in r.stdout, r.stdout


def test_builds_on_first_use(tmp_path):
    # No ROXAMEN_LIB and (ROXAMEN_BUILD=1) no checkout library: the package builds one into the
    # cache, and a second process finds it there without building.
    if not shutil.which("go"):
        pytest.fail("no go command: the first-use build needs it")
    e = env(ROXAMEN_BUILD="1", ROXAMEN_CACHE=str(tmp_path / "cache"))
    e.pop("ROXAMEN_LIB", None)
    code = "import roxamen as rx; rx.init(); print(rx._lib.find(), rx.n_pes()); rx.finalize()"
    r = subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    path, npes = r.stdout.split()
    assert path.startswith(str(tmp_path / "cache")) and path.endswith("libroxamen.so") and npes == "1", r.stdout
    e["PATH"] = "/nonexistent"  # no go now: the cached library must do
    r = subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split()[0] == path, r.stdout


def test_torchrun(tmp_path):
    pytest.importorskip("torch")  # the H200 machine has it; the CI host does not
    p = script(tmp_path, """
        import numpy as np, roxamen as rx
        rx.init()  # torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
        x = rx.zeros(2, np.float32)
        x[:] = rx.my_pe() + 1
        rx.allreduce(x, x, "sum")
        print("PE %d of %d: %s" % (rx.my_pe(), rx.n_pes(), x.tolist()))
        rx.finalize()
    """)
    torchrun = shutil.which("torchrun") or pytest.fail("torch without torchrun")
    r = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", "29621", p], env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0 and "PE 1 of 2: [3.0, 3.0]" in r.stdout, r.stdout


def test_torch_process_group(tmp_path):
    torch = pytest.importorskip("torch")  # the H200 machine has it; the CI host does not
    p = script(tmp_path, """
        import sys, numpy as np, torch.distributed as dist, roxamen as rx
        dist.init_process_group("gloo")
        rx.init_torch()
        x = rx.zeros(2, np.float64)
        x[:] = rx.my_pe()
        rx.allreduce(x, x, "sum")
        print("PE %d of %d: %s" % (rx.my_pe(), rx.n_pes(), x.tolist()))
        rx.finalize()
    """)
    torchrun = shutil.which("torchrun") or pytest.fail("torch without torchrun")
    r = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", "29611", p], env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0 and "PE 1 of 2: [1.0, 1.0]" in r.stdout, r.stdout
