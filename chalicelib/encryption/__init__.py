"""Encryption and keys: messages sealed at rest, access keys' secrets sealed in the
control table, and the deployment's own signing keys (docs/encryption.md,
docs/security.md).

Its layers, top to bottom:

- `wiring`: which key wrapper and secret cipher the runtime uses (KMS, or local keys),
  and `ContainerKeys`, each of the container's keys fetched or made once;
- `envelope`: envelope encryption of message bodies and attribute values (`MessageCipher`);
- `keys` (key-encryption keys: `KmsKeys`, `LocalKeys`) and `secret_cipher` (`KmsCipher`,
  `LocalCipher`);
- `deployment_keys`: the receipt and console keys (environment, SSM, or a key file).

Key files are made at random only by the local runtime (`dmqlocal/key_files.py`, handed
in as its `LocalParts`). On Lambda the keys come from KMS, SSM or the environment, or a
key file a setting names, which must already exist and is only read.
"""
