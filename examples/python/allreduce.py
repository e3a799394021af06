"""Sum a vector over every PE of the job:

    PYTHONPATH=python roxrun -n 4 python3 examples/python/allreduce.py

The first run builds libroxamen.so into a cache (Go and gcc needed) unless the checkout's root
has one (CGO_ENABLED=1 go build -buildmode=c-shared -o libroxamen.so ./capi) or ROXAMEN_LIB
names it.
"""

import numpy as np

import roxamen as rx

rx.init()
me, n = rx.my_pe(), rx.n_pes()
x = rx.zeros(8, np.float32)          # symmetric: the same array on every PE
x[:] = np.arange(8) + me             # written like any numpy array
rx.allreduce(x, x, "sum")            # in place, over every PE
want = n * np.arange(8) + n * (n - 1) / 2
assert (x == want).all(), x
print("PE %d of %d: allreduce %s" % (me, n, x.tolist()))
rx.free(x)
rx.finalize()
