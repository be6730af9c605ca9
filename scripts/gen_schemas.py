#!/usr/bin/env python3
"""Writes the operator-schema table (`schemas/onnx-operators.tsv`) from the installed onnx
package's `onnx.defs`: one record per operator and since-version, as tab-separated lines.

    python scripts/gen_schemas.py [OUT]          # write the table (default: the repository's)
    python scripts/gen_schemas.py --check [FILE] # exit 1 when FILE differs from onnx.defs

Only facts of the specification are recorded (names, versions, arities, attribute types and
defaults, type constraints); no documentation text. The build script (`build.rs`) compiles
the table into the library.

Record lines (fields separated by one tab):
    V ir_version                                          (the newest IR version onnx knows)
    D domain min_version max_version                      (every operator-set domain)
    S domain name since_version deprecated has_function min_in max_in min_out max_out
    I name type_str option homogeneous min_arity        (one per formal input, in order)
    O name type_str option homogeneous min_arity        (one per formal output, in order)
    A name attr_type required default                    (default is `-` when there is none)
    T param allowed_types                                 (comma-separated type strings)
option is `single`, `optional` or `variadic`; `max_in`/`max_out` are `inf` when unbounded.
"""

import os
import sys

import numpy as np
import onnx
from onnx import defs, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "schemas", "onnx-operators.tsv")

OPTIONS = {
    defs.OpSchema.FormalParameterOption.Single: "single",
    defs.OpSchema.FormalParameterOption.Optional: "optional",
    defs.OpSchema.FormalParameterOption.Variadic: "variadic",
}


def escape(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def default_of(attr):
    """The attribute's default as `kind:value`, or `-`."""
    d = attr.default_value
    if d is None or not d.name and d.type == 0:
        return "-"
    v = helper.get_attribute_value(d)
    t = onnx.AttributeProto.AttributeType.Name(d.type)
    if t == "INT":
        return f"i:{v}"
    if t == "FLOAT":
        return "f:" + str(np.float32(v))
    if t == "STRING":
        return "s:" + escape(v.decode("utf-8") if isinstance(v, bytes) else v)
    if t == "INTS":
        return "ints:" + ",".join(str(x) for x in v)
    if t == "FLOATS":
        return "floats:" + ",".join(str(np.float32(x)) for x in v)
    if t == "STRINGS":
        return "strings:" + ",".join(
            escape(x.decode("utf-8") if isinstance(x, bytes) else x) for x in v
        )
    return t.lower()


def formal(kind, p):
    return "\t".join(
        [
            kind,
            p.name,
            p.type_str,
            OPTIONS[p.option],
            "1" if p.is_homogeneous else "0",
            str(p.min_arity),
        ]
    )


def bound(n):
    return "inf" if n >= 2**31 - 1 else str(n)


def table():
    lines = [
        f"# ONNX operator schemas from onnx {onnx.__version__} (onnx.defs), written by "
        "scripts/gen_schemas.py; do not edit.",
    ]
    lines.append(f"V\t{onnx.IR_VERSION}")
    for domain, (lo, hi) in sorted(defs.C.schema_version_map().items()):
        lines.append(f"D\t{domain or 'ai.onnx'}\t{lo}\t{hi}")
    schemas = sorted(
        defs.get_all_schemas_with_history(),
        key=lambda s: (s.domain, s.name, s.since_version),
    )
    for s in schemas:
        lines.append(
            "\t".join(
                [
                    "S",
                    s.domain or "ai.onnx",
                    s.name,
                    str(s.since_version),
                    "1" if s.deprecated else "0",
                    "1" if (s.has_function or s.has_context_dependent_function) else "0",
                    str(s.min_input),
                    bound(s.max_input),
                    str(s.min_output),
                    bound(s.max_output),
                ]
            )
        )
        lines.extend(formal("I", p) for p in s.inputs)
        lines.extend(formal("O", p) for p in s.outputs)
        for name in sorted(s.attributes):
            a = s.attributes[name]
            lines.append(
                "\t".join(
                    [
                        "A",
                        name,
                        a.type.name,
                        "1" if a.required else "0",
                        default_of(a),
                    ]
                )
            )
        for t in s.type_constraints:
            lines.append("\t".join(["T", t.type_param_str, ",".join(t.allowed_type_strs)]))
    return "\n".join(lines) + "\n"


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    path = args[0] if args else DEFAULT
    text = table()
    if check:
        with open(path, encoding="utf-8") as f:
            have = f.read()
        if have != text:
            old, new = have.splitlines(), text.splitlines()
            for i, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    print(f"line {i + 1}: table has {a!r}, onnx.defs gives {b!r}")
                    break
            else:
                print(f"the table has {len(old)} lines, onnx.defs gives {len(new)}")
            print(f"{path} differs from onnx {onnx.__version__}: run scripts/gen_schemas.py")
            return 1
        print(f"{path} matches onnx {onnx.__version__}")
        return 0
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}: {text.count(chr(10) + 'S' + chr(9))} schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
