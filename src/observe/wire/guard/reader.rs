//! The bounded reader the guard walks with: Kafka's primitive encodings (integers,
//! varints, strings, arrays, tagged fields), each read refusing to go past the body's end
//! and every array refusing a count larger than the bytes that remain.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GuardError {
    #[error("body ends early at byte {at}: {need} more bytes needed")]
    Short { at: usize, need: usize },
    #[error("{what} length {length} at byte {at} is invalid")]
    BadLength {
        what: &'static str,
        length: i64,
        at: usize,
    },
    #[error("array at byte {at} claims {count} elements but only {remaining} bytes remain")]
    ArrayTooLong {
        at: usize,
        count: u64,
        remaining: usize,
    },
    #[error("version {0} is outside what this client decodes")]
    Version(i16),
}

pub(super) type Check = Result<(), GuardError>;

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], GuardError> {
        if self.remaining() < n {
            return Err(GuardError::Short {
                at: self.pos,
                need: n - self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Check {
        self.take(n).map(|_| ())
    }

    pub(crate) fn i16(&mut self) -> Result<i16, GuardError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, GuardError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Mirrors the crate's reading of an unsigned varint: at most five bytes, the fifth taken
    /// as final whatever its high bit.
    pub(crate) fn uvarint(&mut self) -> Result<u32, GuardError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = u32::from(self.take(1)?[0]);
            value |= (b & 0x7f).wrapping_shl(i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    pub(crate) fn sized(&mut self, what: &'static str, at: usize, length: i64) -> Check {
        if length < 0 {
            return Err(GuardError::BadLength { what, length, at });
        }
        let n = usize::try_from(length).map_err(|_| GuardError::BadLength { what, length, at })?;
        self.skip(n)
    }

    /// A string, nullable or not: the wire form is the same, and the crate itself rejects a
    /// null where none is allowed.
    pub(crate) fn string(&mut self, flexible: bool) -> Check {
        let at = self.pos;
        if flexible {
            match self.uvarint()? {
                0 => Ok(()),
                n => self.sized("string", at, i64::from(n) - 1),
            }
        } else {
            match self.i16()? {
                -1 => Ok(()),
                n => self.sized("string", at, i64::from(n)),
            }
        }
    }

    pub(crate) fn bytes(&mut self, flexible: bool) -> Check {
        let at = self.pos;
        if flexible {
            match self.uvarint()? {
                0 => Ok(()),
                n => self.sized("bytes", at, i64::from(n) - 1),
            }
        } else {
            match self.i32()? {
                -1 => Ok(()),
                n => self.sized("bytes", at, i64::from(n)),
            }
        }
    }

    /// An array whose elements each take at least `min_element` bytes, walked with `element`.
    pub(crate) fn array(
        &mut self,
        flexible: bool,
        min_element: usize,
        mut element: impl FnMut(&mut Self) -> Check,
    ) -> Check {
        let at = self.pos;
        let count: u64 = if flexible {
            match self.uvarint()? {
                0 => return Ok(()),
                n => u64::from(n) - 1,
            }
        } else {
            match self.i32()? {
                -1 => return Ok(()),
                n if n < -1 => {
                    return Err(GuardError::BadLength {
                        what: "array",
                        length: i64::from(n),
                        at,
                    })
                }
                n => n as u64,
            }
        };
        let remaining = self.remaining();
        if count.saturating_mul(min_element.max(1) as u64) > remaining as u64 {
            return Err(GuardError::ArrayTooLong {
                at,
                count,
                remaining,
            });
        }
        for _ in 0..count {
            element(self)?;
        }
        Ok(())
    }

    pub(crate) fn int32_array(&mut self, flexible: bool) -> Check {
        self.array(flexible, 4, |r| r.skip(4))
    }

    /// Tagged fields. `known` walks the value of a tag the crate decodes itself and returns
    /// false for tags the crate keeps as raw bytes: the crate reads known values from the
    /// stream without regard to their declared size, so this walk does the same.
    pub(crate) fn tagged_fields(
        &mut self,
        flexible: bool,
        mut known: impl FnMut(&mut Self, u32) -> Result<bool, GuardError>,
    ) -> Check {
        if !flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let at = self.pos;
            let size = self.uvarint()?;
            if !known(self, tag)? {
                self.sized("tagged field", at, i64::from(size))?;
            }
        }
        Ok(())
    }

    pub(crate) fn plain_tags(&mut self, flexible: bool) -> Check {
        self.tagged_fields(flexible, |_, _| Ok(false))
    }
}
