#!/usr/bin/env python3
"""File-level call graph of the library from its object files: A -> B when A.o uses a symbol B.o defines.
Prints circles (strongly connected components of >1 file), floors (longest-path levels of the
condensation), arrow counts, and the room (directory) graph."""
import subprocess, sys, os, collections, glob
build = sys.argv[1] if len(sys.argv) > 1 else 'build'
objs = glob.glob(f'{build}/CMakeFiles/vkattn_objects.dir/**/*.o', recursive=True)
def name(o):
    p = o.split('vkattn_objects.dir/')[1][:-2]
    return p[:-2] if p.endswith('.c') else p
defs, uses = {}, collections.defaultdict(set)
for o in objs:
    n = name(o)
    out = subprocess.run(['nm', o], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'TDBRC':
            defs[f[2]] = n
        elif len(f) == 2 and f[0] == 'U':
            uses[n].add(f[1])
files = sorted(name(o) for o in objs)
edges = collections.defaultdict(set)
for a in files:
    for s in uses[a]:
        b = defs.get(s)
        if b and b != a:
            edges[a].add(b)
# Tarjan SCC
idx, low, st, on, sccs, c = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(sorted(comp))
for v in files:
    if v not in idx: sc(v)
comp_of = {v: i for i, comp in enumerate(sccs) for v in comp}
# floors: level = 1 + max level of what it uses (condensation)
lvl = {}
def level(i):
    if i in lvl: return lvl[i]
    lvl[i] = 0
    deps = {comp_of[w] for v in sccs[i] for w in edges[v]} - {i}
    lvl[i] = 1 + max((level(d) for d in deps), default=-1)
    return lvl[i]
for i in range(len(sccs)): level(i)
nedges = sum(len(e) for e in edges.values())
circles = [s for s in sccs if len(s) > 1]
print(f'files {len(files)}  arrows {nedges}  floors {1+max(lvl.values())}  circles {len(circles)}')
for s in circles: print('  circle:', ' '.join(s))
room = lambda f: os.path.dirname(f) or '.'
redges = collections.Counter()
for a in files:
    for b in edges[a]:
        if room(a) != room(b): redges[(room(a), room(b))] += 1
print('room arrows:')
for (a, b), n in sorted(redges.items()): print(f'  {a} -> {b}: {n}')
if '-v' in sys.argv:
    for a in files: print(a, '->', ' '.join(sorted(edges[a])))
