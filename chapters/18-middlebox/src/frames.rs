//! HTTP/2's frames, found in a byte stream that is passed on.
//!
//! A middlebox that drops PING frames, and a server that counts them, must
//! know where each frame starts. Every frame begins with a nine-byte header
//! (RFC 9113, section 4.1): a 24-bit payload length, a type, flags and a
//! stream id; the client's side begins with the 24-byte connection preface.
//! So the stream can be followed with one small state machine and no HTTP/2
//! library: read the header, note the frame, skip its payload, repeat. The
//! bytes arrive in chunks that cut frames anywhere, so every state survives
//! between chunks.

/// The client connection preface (RFC 9113, section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
/// END_STREAM on DATA and HEADERS, ACK on PING and SETTINGS.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
/// GOAWAY's error code for a peer that misbehaves (RFC 9113, section 7).
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// One frame's header, and the first bytes of its payload (GOAWAY's error
/// code is in bytes 4..8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub len: u32,
    head: [u8; 8],
}

impl Frame {
    pub fn is_ping(&self) -> bool {
        self.kind == PING && self.flags & ACK == 0
    }

    /// A GOAWAY's error code.
    pub fn error_code(&self) -> Option<u32> {
        (self.kind == GOAWAY && self.len >= 8)
            .then(|| u32::from_be_bytes(self.head[4..8].try_into().unwrap()))
    }
}

/// Follows one direction of an HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Scanner {
    /// Preface bytes still to pass (the client's side only).
    preface: usize,
    header: [u8; HEADER_LEN],
    have: usize,
    /// The frame being passed: payload bytes still to come, whether they
    /// are kept, and whether it has been reported yet.
    current: Option<Current>,
}

#[derive(Debug, Clone)]
struct Current {
    frame: Frame,
    left: u32,
    keep: bool,
    reported: bool,
}

impl Scanner {
    /// The bytes a client sends: the preface first.
    pub fn from_client() -> Scanner {
        Scanner {
            preface: PREFACE.len(),
            header: [0; HEADER_LEN],
            have: 0,
            current: None,
        }
    }

    /// The bytes a server sends.
    pub fn from_server() -> Scanner {
        Scanner {
            preface: 0,
            ..Scanner::from_client()
        }
    }

    /// Whether the bytes so far end exactly at a frame's end, where another
    /// frame could be put in.
    pub fn at_boundary(&self) -> bool {
        self.preface == 0 && self.have == 0 && self.current.is_none()
    }

    /// Follows `bytes`; returns each frame once its header and the first
    /// bytes of its payload have passed.
    pub fn observe(&mut self, bytes: &[u8]) -> Vec<Frame> {
        self.scan(bytes, None, |_| false)
    }

    // ANCHOR: filter
    /// Follows `bytes` and appends to `out` all but the frames `drop` picks
    /// (header and payload). A header cut by the chunk's end is held until
    /// the rest arrives: whether it is passed on is not known before.
    pub fn filter(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
        drop: impl FnMut(&Frame) -> bool,
    ) -> Vec<Frame> {
        self.scan(bytes, Some(out), drop)
    }
    // ANCHOR_END: filter

    fn scan(
        &mut self,
        mut bytes: &[u8],
        mut out: Option<&mut Vec<u8>>,
        mut drop: impl FnMut(&Frame) -> bool,
    ) -> Vec<Frame> {
        let mut frames = Vec::new();
        let pass = |out: &mut Option<&mut Vec<u8>>, part: &[u8]| {
            if let Some(out) = out.as_mut() {
                out.extend_from_slice(part);
            }
        };
        while !bytes.is_empty() {
            if self.preface > 0 {
                let n = self.preface.min(bytes.len());
                pass(&mut out, &bytes[..n]);
                self.preface -= n;
                bytes = &bytes[n..];
                continue;
            }
            let Some(current) = &mut self.current else {
                let n = (HEADER_LEN - self.have).min(bytes.len());
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == HEADER_LEN {
                    self.have = 0;
                    let h = self.header;
                    let frame = Frame {
                        len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
                        kind: h[3],
                        flags: h[4],
                        stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
                        head: [0; 8],
                    };
                    let keep = !drop(&frame);
                    if keep {
                        pass(&mut out, &h);
                    }
                    self.current = Some(Current {
                        frame,
                        left: frame.len,
                        keep,
                        reported: false,
                    });
                    self.finish(&mut frames);
                }
                continue;
            };
            let n = (current.left as usize).min(bytes.len());
            let offset = (current.frame.len - current.left) as usize;
            if offset < 8 {
                let m = n.min(8 - offset);
                current.frame.head[offset..offset + m].copy_from_slice(&bytes[..m]);
            }
            if current.keep {
                pass(&mut out, &bytes[..n]);
            }
            current.left -= n as u32;
            bytes = &bytes[n..];
            self.finish(&mut frames);
        }
        frames
    }

    /// Reports the current frame once its head is known, and ends it once
    /// its payload has passed.
    fn finish(&mut self, frames: &mut Vec<Frame>) {
        let Some(current) = &mut self.current else {
            return;
        };
        let passed = current.frame.len - current.left;
        if !current.reported && (passed >= 8 || current.left == 0) {
            current.reported = true;
            frames.push(current.frame);
        }
        if current.left == 0 {
            self.current = None;
        }
    }
}

/// A frame's bytes: header and payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut bytes = vec![len[1], len[2], len[3], kind, flags];
    bytes.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A GOAWAY frame: the last stream the sender will process, a code, and
/// debug data (gRFC A8 sends "too_many_pings").
pub fn goaway(last_stream: u32, code: u32, debug: &[u8]) -> Vec<u8> {
    let mut payload = (last_stream & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(debug);
    frame(GOAWAY, 0, 0, &payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's side: preface, SETTINGS, a PING, HEADERS, a PING ACK, DATA.
    fn stream() -> Vec<u8> {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 0, 0, &[0; 6]));
        bytes.extend(frame(PING, 0, 0, b"12345678"));
        bytes.extend(frame(HEADERS, 0x4, 1, b"hdrs"));
        bytes.extend(frame(PING, ACK, 0, b"abcdefgh"));
        bytes.extend(frame(DATA, END_STREAM, 1, &[7; 40]));
        bytes
    }

    fn kinds(frames: &[Frame]) -> Vec<(u8, u8)> {
        frames.iter().map(|f| (f.kind, f.flags)).collect()
    }

    #[test]
    fn finds_every_frame_however_the_stream_is_cut() {
        let bytes = stream();
        let whole = Scanner::from_client().observe(&bytes);
        assert_eq!(
            kinds(&whole),
            [
                (0x4, 0),
                (PING, 0),
                (HEADERS, 0x4),
                (PING, ACK),
                (DATA, END_STREAM)
            ]
        );
        for size in 1..bytes.len() {
            let mut scanner = Scanner::from_client();
            let frames: Vec<_> = bytes
                .chunks(size)
                .flat_map(|c| scanner.observe(c))
                .collect();
            assert_eq!(frames, whole, "chunks of {size}");
            assert!(scanner.at_boundary());
        }
    }

    #[test]
    fn drops_pings_and_passes_everything_else_byte_for_byte() {
        let bytes = stream();
        let mut expected = PREFACE.to_vec();
        expected.extend(frame(0x4, 0, 0, &[0; 6]));
        expected.extend(frame(HEADERS, 0x4, 1, b"hdrs"));
        expected.extend(frame(DATA, END_STREAM, 1, &[7; 40]));
        for size in 1..bytes.len() {
            let mut scanner = Scanner::from_client();
            let mut out = Vec::new();
            for chunk in bytes.chunks(size) {
                scanner.filter(chunk, &mut out, |f| f.kind == PING);
            }
            assert_eq!(out, expected, "chunks of {size}");
        }
    }

    #[test]
    fn reads_a_goaways_code() {
        let bytes = goaway(5, ENHANCE_YOUR_CALM, b"too_many_pings");
        let frames = Scanner::from_server().observe(&bytes);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].error_code(), Some(ENHANCE_YOUR_CALM));
        assert!(!frames[0].is_ping());
    }

    #[test]
    fn the_middle_of_a_frame_is_not_a_boundary() {
        let mut scanner = Scanner::from_server();
        let bytes = frame(DATA, 0, 1, &[1; 20]);
        scanner.observe(&bytes[..4]);
        assert!(!scanner.at_boundary());
        scanner.observe(&bytes[4..12]);
        assert!(!scanner.at_boundary());
        scanner.observe(&bytes[12..]);
        assert!(scanner.at_boundary());
    }
}
