"""Every committed split spec validates against proto/split_spec.schema.json,
and specs the CLI rejects for their form are rejected by the schema too."""
import glob
import json
import os
import sys

import jsonschema

src = sys.argv[1]
schema = json.load(open(os.path.join(src, "proto", "split_spec.schema.json")))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
specs = sorted(glob.glob(os.path.join(src, "testdata", "specs", "*.json")))
assert len(specs) >= 19, specs
for path in specs:
    validator.validate(json.load(open(path)))
bad = [
    {},
    {"split_points": {"a": "MIDDLE"}},
    {"stages": [["a"]]},
    {"split_after_nodes": []},
    {"split_points": {"a": "END"}, "stages": [["a"], ["b"]]},
    {"splitpoints": {}},
]
for spec in bad:
    assert not validator.is_valid(spec), spec
print(f"spec_schema: {len(specs)} specs valid, {len(bad)} bad ones rejected")
