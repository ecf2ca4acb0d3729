"""Shared test setup: the helpers tests run at the cpu profile, whatever the machine."""

import os

os.environ.setdefault("COURSE_PROFILE", "cpu")
