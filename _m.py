import time
from bug_injection.real_world import corpus, run_entry
t=time.time()
for e in corpus():
    b = run_entry(e, "buggy"); f = run_entry(e, "fixed")
    print(f"{e.name:40} rec={e.verdict:9} got={b.verdict:9} {b.codes} {b.message[:150]} | fixed={f.verdict} {f.codes} {f.message[:150]} {b.seconds:.2f}+{f.seconds:.2f}")
print(len(corpus()), time.time()-t)
