"""The JUnit XML form of a data-quality check (``dprelease check --junit``): columns and rules, never a value."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def junit_report(suite_name: str, cases: list[tuple[str, str, str | None, bool]]) -> bytes:
    """A JUnit XML report: one testcase per (column, rule), failed ones with the rule as message.

    Args:
        suite_name: The testsuite's name (file names only).
        cases: ``(classname, rule, failure, errored)``: the classname groups the testcase (``column
            NAME`` for a column's rules, ``schema`` or ``input`` for a file that cannot be read);
            ``failure`` is None when the rule passed; ``errored`` marks a check that could not be
            evaluated.

    Returns:
        The UTF-8 encoded document. It names columns and rules from the schema, never a value.
    """
    failures = sum(1 for _, _, failure, errored in cases if failure is not None and not errored)
    errors = sum(1 for _, _, failure, errored in cases if failure is not None and errored)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors), "skipped": "0"}
    root = ET.Element("testsuites", {"name": "dprelease check", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": suite_name, **counts})
    for classname, rule, failure, errored in cases:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": rule})
        if failure is not None:
            ET.SubElement(case, "error" if errored else "failure",
                          {"message": failure, "type": "error" if errored else "rule"}).text = failure
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"
