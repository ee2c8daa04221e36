"""``varlens teach``: list, hand out and grade the backward-pass exercises."""
from __future__ import annotations

import importlib.util
import os
import sys


def add_arguments(p):
    sub = p.add_subparsers(dest="teach_command", metavar="ACTION")
    sub.add_parser("list", help="the exercises")
    new = sub.add_parser("new", help="write NAME_exercise.py (backward blank) and its pytest grading file")
    new.add_argument("name")
    new.add_argument("--out", default=".", help="folder to write into (default: here)")
    new.add_argument("--solution", action="store_true", help="write the teacher's backward instead of a blank")
    new.add_argument("--force", action="store_true", help="overwrite existing files")
    chk = sub.add_parser("check", help="grade a student's exercise file")
    chk.add_argument("file")
    chk.add_argument("--name", help="the exercise (default: from the file name NAME_exercise.py)")


def run(args):
    from varlens.teach import exercises as E
    cmd = getattr(args, "teach_command", None)
    if cmd in (None, "list"):
        for ex in E.EXERCISES.values():
            print(f"{ex.name:24s} {ex.title}  (notes: {ex.notes})")
        return 0
    if cmd == "new":
        try:
            E.get(args.name)
        except KeyError as e:
            print(f"varlens teach: {e.args[0]}", file=sys.stderr)
            return 2
        os.makedirs(args.out, exist_ok=True)
        student = f"{args.name}_exercise.py"
        files = {student: E.template(args.name, solution=args.solution),
                 f"test_{args.name}_grading.py": E.grading_tests(args.name, student)}
        for fname in files:
            path = os.path.join(args.out, fname)
            if os.path.exists(path) and not args.force:
                print(f"varlens teach: {path} exists; pass --force to overwrite it", file=sys.stderr)
                return 2
        for fname, text in files.items():
            with open(os.path.join(args.out, fname), "w") as f:
                f.write(text)
            print(f"wrote {os.path.join(args.out, fname)}")
        return 0
    # check
    path = args.file
    name = args.name or os.path.basename(path).removesuffix(".py").removesuffix("_exercise")
    try:
        ex = E.get(name)
    except KeyError as e:
        print(f"varlens teach: {e.args[0]} (pass --name)", file=sys.stderr)
        return 2
    if not os.path.isfile(path):
        print(f"varlens teach: {path!r} is not a file", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("student_exercise", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cls = getattr(mod, E.class_name(ex.name), None)
    if cls is None:
        print(f"varlens teach: {path} defines no class {E.class_name(ex.name)}", file=sys.stderr)
        return 2
    results = E.grade(ex.name, cls)
    for r in results:
        print(f"[{'PASS' if r.passed else 'FAIL'}] {r.check:20s} {r.message.splitlines()[0][:200]}")
    passed = sum(r.passed for r in results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1
