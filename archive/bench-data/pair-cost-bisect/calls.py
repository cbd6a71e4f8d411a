import sys, re, collections
path, pat = sys.argv[1], re.compile(sys.argv[2])
names = {}
def resolve(s):
    m = re.match(r'\((\d+)\)(?: (.*))?', s)
    if not m: return s
    if m.group(2) is not None: names[m.group(1)] = m.group(2)
    return names.get(m.group(1), s)
calls = collections.Counter(); incl = collections.Counter()
events = None
cfn = None; pending = None
with open(path) as f:
    for line in f:
        line = line.rstrip('\n')
        if line.startswith('events:'): events = line.split()[1:]
        elif line.startswith('fn='): resolve(line[3:])
        elif line.startswith('cfn='): cfn = resolve(line[4:])
        elif line.startswith(('fl=','fi=','fe=','cfi=','cfl=','ob=','cob=')): pass
        elif line.startswith('calls='):
            pending = int(line[6:].split()[0])
        elif pending is not None:
            parts = line.split()
            ir = int(parts[1]) if len(parts) > 1 else 0
            calls[cfn] += pending; incl[cfn] += ir; pending = None
rows = [(n, calls[n], incl[n]) for n in calls if pat.search(n)]
rows.sort(key=lambda r: -r[2])
for n, c, i in rows[:40]:
    print(f"{c:>12} calls {i:>14} Ir {i/c:>10.1f} Ir/call  {n[:200]}")
