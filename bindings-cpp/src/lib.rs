//! librmm: built out in the C++ binding issue.
