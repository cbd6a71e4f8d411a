//! rmm._rmm: built out in the Python binding issue.
