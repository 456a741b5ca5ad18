"""The differential test's corpus of Python state functions, and the inputs they are run on."""
