# ftrl_ref.py - FTRL-Proximal written from McMahan et al., "Ad Click
# Prediction: a View from the Trenches" (KDD 2013), Algorithm 1, per
# coordinate, in Python floats (double), as the reference for
# tests/unit/test_optim.c's optim_ftrl_matches_the_papers_algorithm.
# Prints each step's weights. The paper's w_t is the weight before the
# step; it starts at the model's initial value (as TensorFlow's Ftrl).
#   python3 ftrl_ref.py
import math

def ftrl(w0, grads, alpha, beta, l1, l2, n0=0.0):
    w, z, n, out = list(w0), [0.0] * len(w0), [n0] * len(w0), []
    for g in grads:
        for i, gi in enumerate(g):
            sigma = (math.sqrt(n[i] + gi * gi) - math.sqrt(n[i])) / alpha
            z[i] = z[i] + gi - sigma * w[i]
            n[i] = n[i] + gi * gi
            if abs(z[i]) <= l1:
                w[i] = 0.0
            else:
                sgn = 1.0 if z[i] > 0 else -1.0
                w[i] = -(z[i] - sgn * l1) / ((beta + math.sqrt(n[i])) / alpha + l2)
        out.append(list(w))
    return out

W0 = [0.5, -1.25, 2.0]
G = [[0.1, -0.2, 0.3], [-0.4, 0.05, 0.25], [0.3, 0.6, -0.15]]
for args in [(0.1, 1.0, 0.0, 0.0), (0.5, 1.0, 0.1, 0.2), (0.05, 0.5, 0.0, 1.0, 0.1)]:
    print(args, [["%.17g" % v for v in step] for step in ftrl(W0, G, *args)])
