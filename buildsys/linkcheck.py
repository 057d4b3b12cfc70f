"""Does the shim jar link against a given Spark's jars? A static check, no JVM started.

`python buildsys/linkcheck.py SHIM.jar SPARK_JARS_DIR` reads the class files of both and
reports, for every class of the shim: each Spark or Scala class it names that the given jars
lack, each method or field it calls that no class of the given jars declares (what the JVM
would throw as NoClassDefFoundError / NoSuchMethodError / NoSuchFieldError when the code runs),
and each abstract method of a Spark supertype the shim's class does not implement
(AbstractMethodError when Spark calls it). References guarded at run time (the version
adapters of `io.ttlstate.spark.compat`) show up too; the report marks their classes.
"""

from __future__ import annotations

import pathlib
import struct
import sys
import zipfile

CHECKED = ("org/apache/spark/", "scala/", "org/apache/hadoop/")


class ClassInfo:
    def __init__(self, data: bytes):
        self.refs: list[tuple[str, str, str, str]] = []  # (kind, owner, name, desc)
        self.classes: set[str] = set()
        pos = 10
        (count,) = struct.unpack_from(">H", data, 8)
        cp: list = [None] * count
        i = 1
        while i < count:
            tag = data[pos]
            if tag == 1:
                (n,) = struct.unpack_from(">H", data, pos + 1)
                cp[i] = data[pos + 3:pos + 3 + n].decode("utf-8", "replace")
                pos += 3 + n
            elif tag in (3, 4):
                pos += 5
            elif tag in (5, 6):
                pos += 9
                i += 1
            elif tag in (7, 8, 16, 19, 20):
                cp[i] = (tag, struct.unpack_from(">H", data, pos + 1)[0])
                pos += 3
            elif tag in (9, 10, 11, 12, 17, 18):
                cp[i] = (tag,) + struct.unpack_from(">HH", data, pos + 1)
                pos += 5
            elif tag == 15:
                pos += 4
            else:
                raise ValueError(f"constant tag {tag}")
            i += 1

        def cls(idx):
            return cp[cp[idx][1]]

        for e in cp:
            if isinstance(e, tuple) and e[0] == 7:
                self.classes.add(cp[e[1]])
            elif isinstance(e, tuple) and e[0] in (9, 10, 11):
                nat = cp[e[2]]
                kind = {9: "field", 10: "method", 11: "method"}[e[0]]
                self.refs.append((kind, cls(e[1]), cp[nat[1]], cp[nat[2]]))
        self.access, this, sup, n_if = struct.unpack_from(">HHHH", data, pos)
        self.name = cls(this)
        self.super = cls(sup) if sup else None
        pos += 8
        self.interfaces = [cls(struct.unpack_from(">H", data, pos + 2 * k)[0]) for k in range(n_if)]
        pos += 2 * n_if
        members = []
        for _ in range(2):
            (n,) = struct.unpack_from(">H", data, pos)
            pos += 2
            got = []
            for _ in range(n):
                acc, name, desc, n_attr = struct.unpack_from(">HHHH", data, pos)
                pos += 8
                for _ in range(n_attr):
                    (length,) = struct.unpack_from(">I", data, pos + 2)
                    pos += 6 + length
                got.append((acc, cp[name], cp[desc]))
            members.append(got)
        self.fields, self.methods = members


class ClassPath:
    def __init__(self, jars):
        self.index: dict[str, tuple[zipfile.ZipFile, str]] = {}
        self.cache: dict[str, ClassInfo | None] = {}
        for jar in jars:
            z = zipfile.ZipFile(jar)
            for n in z.namelist():
                if n.endswith(".class") and not n.startswith("META-INF/"):
                    self.index.setdefault(n[:-6], (z, n))

    def get(self, name: str) -> ClassInfo | None:
        if name not in self.cache:
            hit = self.index.get(name)
            self.cache[name] = ClassInfo(hit[0].read(hit[1])) if hit else None
        return self.cache[name]

    def supertypes(self, name: str):
        seen, todo = [], [name]
        while todo:
            n = todo.pop(0)
            c = self.get(n)
            if c is None or n in seen:
                continue
            seen.append(n)
            todo += ([c.super] if c.super else []) + c.interfaces
        return seen

    def declares(self, owner: str, kind: str, name: str, desc: str) -> bool | None:
        """True/False for a member of a known class (searched up its supertypes), None if the
        class is outside this class path (the JDK)."""
        if self.get(owner) is None:
            return None
        for n in self.supertypes(owner):
            c = self.get(n)
            for _, mname, mdesc in (c.fields if kind == "field" else c.methods):
                if mname == name and (mdesc == desc or (kind == "method" and _polymorphic(n, name))):
                    return True
        # a supertype outside the class path (a JDK class other than Object) may declare it
        for n in self.supertypes(owner):
            c = self.get(n)
            for p in ([c.super] if c.super else []) + c.interfaces:
                if self.get(p) is None and p not in MARKERS and not p.startswith(CHECKED):
                    return None
        return False


def _polymorphic(owner, name):
    return owner == "java/lang/invoke/MethodHandle"


# JDK supertypes that declare no members the shim could call.
MARKERS = {"java/lang/Object", "java/io/Serializable", "java/lang/Cloneable"}
OBJECT_METHODS = {"equals", "hashCode", "toString", "getClass", "clone", "finalize", "notify",
                  "notifyAll", "wait"}


def check(shim_jar: str, spark_dir: str) -> list[str]:
    spark = ClassPath(sorted(pathlib.Path(spark_dir).glob("*.jar")))
    shim = ClassPath([shim_jar])
    both = ClassPath([shim_jar] + sorted(pathlib.Path(spark_dir).glob("*.jar")))
    problems = []
    for name in sorted(shim.index):
        c = shim.get(name)
        for ref in sorted(c.classes):
            base = ref.lstrip("[")
            if base.startswith("L"):
                base = base[1:-1]
            if base.startswith(CHECKED) and both.get(base) is None:
                problems.append(f"{name}: missing class {base}")
        for kind, owner, mname, desc in sorted(set(c.refs)):
            if not owner.startswith(CHECKED) or owner.startswith("["):
                continue
            if both.get(owner) is None:
                continue  # reported as a missing class
            if kind == "method" and mname in OBJECT_METHODS:
                continue
            if both.declares(owner, kind, mname, desc) is False:
                problems.append(f"{name}: missing {kind} {owner}.{mname}{desc}")
        if c.access & 0x0600:  # interface or abstract
            continue
        implemented = set()
        abstract = {}
        for n in both.supertypes(name):
            k = both.get(n)
            for acc, mname, desc in k.methods:
                if acc & 0x0400:
                    abstract.setdefault((mname, desc), n)
                elif not acc & 0x0008:
                    implemented.add((mname, desc))
        for (mname, desc), owner in sorted(abstract.items()):
            if (mname, desc) not in implemented and owner.startswith(CHECKED):
                problems.append(f"{name}: does not implement {owner}.{mname}{desc}")
    return problems


if __name__ == "__main__":
    found = check(sys.argv[1], sys.argv[2])
    print("\n".join(found) if found else "no linkage problems")
    sys.exit(1 if found else 0)
