"""The multi-PE suite: run as one job, every PE running the same tests in the same order
(`roxrun -n 4 python3 -m pytest python/tests/job`). The job is joined once per process."""

import sys

import pytest

import roxamen as rx


@pytest.fixture(scope="session", autouse=True)
def job():
    rx.init()
    yield
    rx.barrier_all()
    rx.finalize()


def pytest_runtest_logreport(report):
    # Each failure at once on stderr, naming the PE: a PE that then stops (a collective left
    # unmatched fails the others' calls) still says why.
    if report.failed:
        sys.stderr.write("PE %d: %s %s failed:\n%s\n" % (rx.my_pe(), report.nodeid, report.when, report.longreprtext))
        sys.stderr.flush()
