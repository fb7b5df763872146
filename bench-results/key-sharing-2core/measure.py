"""RSS of two servers on two indexes enrolled under one key set (issue 17: keys loaded once per process)."""
import os, sys, json, resource
from pathlib import Path
import numpy as np
import encmatch
from encmatch import Client, Enroller, Server

work = Path(sys.argv[1])
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
if not (work / "keys").exists():
    with Client.generate(work / "keys", preset="default", dim=16, strategy="bsgs-tbe") as c:
        pass
    g = np.random.default_rng(0).standard_normal((40, 16)).astype("f4")
    for name in ("ix1", "ix2"):
        e = Enroller(work / "keys" / "server", owner_key_dir=work / "keys")
        e.create_index(work / name, 0.5)
        e.enroll(work / name, g[:20] if name == "ix1" else g[20:])
    print("prepared"); sys.exit(0)
keys = sum(f.stat().st_size for f in (work / "keys" / "server").glob("*.key"))
r0 = rss()
s1 = Server(work / "ix1", work / "keys" / "server"); r1 = rss()
s2 = Server(work / "ix2", work / "keys" / "server"); r2 = rss()
print(json.dumps({"lib": os.environ.get("ENCMATCH_LIB", "shared (HEAD)"), "server_key_bytes": keys,
                  "rss_before": r0, "after_first": r1, "after_second": r2,
                  "first_adds": r1 - r0, "second_adds": r2 - r1}))
