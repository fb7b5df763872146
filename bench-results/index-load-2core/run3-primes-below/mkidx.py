import numpy as np
from encmatch.keyholder import Client
from encmatch.enroller import Enroller
rng = np.random.default_rng(0)
x = rng.normal(size=(16384, 512)).astype(np.float32)
c = Client.generate("/tmp/li-new/keys", preset="default", dim=512, strategy="bsgs-tbe", fold=True)
for store, owner in (("seeded", "/tmp/li-new/keys"), ("public", None)):
    e = Enroller(c.server_key_dir, owner_key_dir=owner)
    e.create_index(f"/tmp/li-new/index-{store}", 0.5)
    e.enroll(f"/tmp/li-new/index-{store}", x, progress=False)
c.close()
