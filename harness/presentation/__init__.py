"""What people and CI read: report.html, ``harness serve``, suites (JUnit, index pages)."""
