//! The protobuf wire format: a message is a run of (field number, wire value) records. Errors
//! carry the wording of upstream's gogo-generated `Unmarshal` so a client sees what a real
//! server would say.

/// Why wire data could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("unexpected EOF")]
    UnexpectedEof,
    #[error("proto: integer overflow")]
    IntOverflow,
    #[error("proto: negative length found during unmarshaling")]
    NegativeLength,
    #[error("proto: illegal wireType {0}")]
    IllegalWireType(u64),
    #[error("proto: {message}: illegal tag 0 (wire type {wire})")]
    IllegalTag { message: String, wire: u64 },
    #[error("proto: {message}: wiretype end group for non-group")]
    EndGroup { message: String },
    #[error("proto: wrong wireType = {wire} for field {field}")]
    WrongWireType { wire: u64, field: String },
}

/// One record's value, by wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, messages, packed repeated scalars.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

impl Wire<'_> {
    /// The wire type number, for error messages.
    pub fn number(&self) -> u64 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64(_) => 1,
            Wire::Bytes(_) => 2,
            Wire::Fixed32(_) => 5,
        }
    }
}

/// Reads a varint at `*pos`, advancing it.
pub fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut out = 0u64;
    let mut shift = 0;
    loop {
        if shift >= 64 {
            return Err(WireError::IntOverflow);
        }
        let b = *buf.get(*pos).ok_or(WireError::UnexpectedEof)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
        shift += 7;
    }
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, len: usize) -> Result<&'a [u8], WireError> {
    let end = pos.checked_add(len).filter(|e| *e <= buf.len()).ok_or(WireError::UnexpectedEof)?;
    let out = &buf[*pos..end];
    *pos = end;
    Ok(out)
}

/// The records of one message, in wire order. `message` names it in errors (upstream uses the
/// Go type name).
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    message: &'a str,
}

/// Iterate over the records of `buf`.
pub fn records<'a>(buf: &'a [u8], message: &'a str) -> Records<'a> {
    Records { buf, pos: 0, message }
}

impl<'a> Records<'a> {
    fn record(&mut self) -> Result<(u64, Wire<'a>), WireError> {
        let key = varint(self.buf, &mut self.pos)?;
        let (number, wire) = (key >> 3, key & 7);
        if wire == 4 {
            return Err(WireError::EndGroup { message: self.message.to_string() });
        }
        if number == 0 {
            return Err(WireError::IllegalTag { message: self.message.to_string(), wire });
        }
        let value = match wire {
            0 => Wire::Varint(varint(self.buf, &mut self.pos)?),
            1 => Wire::Fixed64(u64::from_le_bytes(take(self.buf, &mut self.pos, 8)?.try_into().expect("8 bytes"))),
            2 => {
                let len = varint(self.buf, &mut self.pos)?;
                let len = i64::try_from(len).map_err(|_| WireError::NegativeLength)?;
                Wire::Bytes(take(self.buf, &mut self.pos, len as usize)?)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(take(self.buf, &mut self.pos, 4)?.try_into().expect("4 bytes"))),
            // Groups (3) are not used by any Kubernetes type.
            other => return Err(WireError::IllegalWireType(other)),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<(u64, Wire<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let r = self.record();
        if r.is_err() {
            // Stop after the first error: the rest of the buffer has no known alignment.
            self.pos = self.buf.len();
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_each_wire_type() {
        let buf = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0, 0];
        let got: Vec<_> = records(&buf, "M").collect::<Result<_, _>>().unwrap();
        assert_eq!(got, vec![(1, Wire::Varint(150)), (2, Wire::Bytes(b"hi")), (3, Wire::Fixed32(1)), (4, Wire::Fixed64(2))]);
    }

    #[test]
    fn truncated_data_is_an_unexpected_eof() {
        assert_eq!(records(&[0x12, 0x05, b'a'], "M").next(), Some(Err(WireError::UnexpectedEof)));
        assert_eq!(records(&[0x08], "M").next(), Some(Err(WireError::UnexpectedEof)));
    }

    #[test]
    fn an_overlong_varint_overflows() {
        let buf = [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(records(&buf, "M").next(), Some(Err(WireError::IntOverflow)));
    }

    #[test]
    fn end_group_and_tag_zero_are_refused_with_upstream_wording() {
        assert_eq!(records(&[0x0c], "Pod").next().unwrap().unwrap_err().to_string(), "proto: Pod: wiretype end group for non-group");
        assert_eq!(records(&[0x00, 0x00], "Pod").next().unwrap().unwrap_err().to_string(), "proto: Pod: illegal tag 0 (wire type 0)");
    }
}
