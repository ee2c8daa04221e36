"""Exercises for the classroom: write an op's backward, graded against the library and finite differences.

``varlens teach list`` names the exercises, ``varlens teach new NAME`` writes the student's file
(forward given, backward blank) and a pytest grading file (marked ``exercise``), and
``varlens teach check FILE`` grades a student's file in the terminal.  Everything runs offline.
"""
from varlens.teach.exercises import EXERCISES, Exercise, Result, get, grade, grading_tests, template

__all__ = ["EXERCISES", "Exercise", "Result", "get", "grade", "grading_tests", "template"]
