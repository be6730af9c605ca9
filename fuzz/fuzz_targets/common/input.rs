//! The byte reader that turns a fuzz input into choices.

/// Reads a fuzz input (or part of one) front to back; zeros once it is used up.
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    /// The next 8 bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        let mut v = [0u8; 8];
        for b in &mut v {
            *b = self.u8();
        }
        u64::from_le_bytes(v)
    }

    /// True with probability about `k`/16.
    pub fn chance(&mut self, k: u8) -> bool {
        self.u8() % 16 < k
    }

    /// An entry of `table`.
    pub fn pick<T: Copy>(&mut self, table: &[T]) -> T {
        table[self.u8() as usize % table.len()]
    }

    /// `p` with probability about `k`/16, else NULL.
    pub fn or_null<T>(&mut self, k: u8, p: *const T) -> *const T {
        if self.chance(k) {
            p
        } else {
            std::ptr::null()
        }
    }

    /// `p` with probability about `k`/16, else NULL.
    pub fn or_null_mut<T>(&mut self, k: u8, p: *mut T) -> *mut T {
        if self.chance(k) {
            p
        } else {
            std::ptr::null_mut()
        }
    }
}
