"""spmd's decomposition of linalg_solve_triangular (trace._solve_triangular:
products with (I + N^(2^j)) factors) against ATen's kernel, in float64, for
every flag (upper, left, unitriangular) and sizes 1 to 64. Prints one line
per case off by more than 1e-10 relative, then the count."""
import torch

from spmd_capture.trace import _solve_triangular

torch.manual_seed(0)
cases = bad = 0
for n in (1, 2, 3, 7, 8, 9, 64):
    for upper in (False, True):
        for unit in (False, True):
            for left in (True, False):
                A = torch.randn(2, n, n, dtype=torch.float64) * 0.3 + \
                    torch.eye(n, dtype=torch.float64) * (1 if unit else 2)
                B = torch.randn(2, n, 3, dtype=torch.float64) if left else \
                    torch.randn(2, 3, n, dtype=torch.float64)
                want = torch.linalg.solve_triangular(A, B, upper=upper, left=left,
                                                     unitriangular=unit)
                got = _solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
                err = ((got - want).abs().max() / want.abs().max()).item()
                cases += 1
                if not err <= 1e-10:
                    bad += 1
                    print("DIFFERS: n=%d upper=%s unitriangular=%s left=%s: %.2g" % (
                        n, upper, unit, left, err))
print("solve_triangular: %d of %d cases match ATen" % (cases - bad, cases))
