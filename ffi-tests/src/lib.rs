//! Tests of the built shared library, loaded from outside (see tests/).
