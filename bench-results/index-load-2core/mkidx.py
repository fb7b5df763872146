import numpy as np
from encmatch.keyholder import Client
from encmatch.enroller import Enroller
rng = np.random.default_rng(0)
x = rng.normal(size=(16384, 512)).astype(np.float32)
for name, fold in (("plain", False), ("folded", True)):
    c = Client.generate(f"/tmp/li/{name}/keys", preset="default", dim=512, strategy="bsgs-tbe", n1=32, fold=fold)
    for store, owner in (("seeded", f"/tmp/li/{name}/keys"), ("public", None)):
        e = Enroller(c.server_key_dir, owner_key_dir=owner)
        e.create_index(f"/tmp/li/{name}/index-{store}", 0.5)
        e.enroll(f"/tmp/li/{name}/index-{store}", x, progress=False)
    c.close()
