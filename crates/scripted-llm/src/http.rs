//! A deliberately small HTTP/1.1 server side: request parsing (keep-alive, `Content-Length` and
//! chunked request bodies) and response writing (fixed-length and chunked).

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest accepted request line or header line, in bytes.
const MAX_LINE: u64 = 64 * 1024;
/// Most header lines accepted in one request.
const MAX_HEADERS: usize = 256;
/// Largest accepted request body, in bytes.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One parsed HTTP request.
#[derive(Debug)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    /// Header names are lowercased; values are trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the connection may serve another request after this one.
    pub keep_alive: bool,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one line including its `\n`, bounded by [`MAX_LINE`]. Returns `None` at EOF before any byte.
async fn read_line<S: AsyncBufRead + Unpin>(io: &mut S) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = (&mut *io)
        .take(MAX_LINE)
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if n as u64 >= MAX_LINE {
            bad("line too long")
        } else {
            io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-line")
        });
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| bad("line is not UTF-8"))
}

/// Reads the next request from a connection. `Ok(None)` means the peer closed the connection
/// cleanly between requests.
pub(crate) async fn read_request<S>(io: &mut S) -> io::Result<Option<Request>>
where
    S: AsyncBufRead + AsyncWrite + Unpin,
{
    // Tolerate stray empty lines before the request line (RFC 9112 §2.2).
    let request_line = loop {
        match read_line(io).await? {
            None => return Ok(None),
            Some(line) if line.is_empty() => continue,
            Some(line) => break line,
        }
    };
    let mut parts = request_line.split_ascii_whitespace();
    let (Some(method), Some(path), version) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad(format!("malformed request line: {request_line:?}")));
    };
    let version = version.unwrap_or("HTTP/1.0").to_ascii_uppercase();

    let mut headers = Vec::new();
    loop {
        let line = read_line(io)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "eof in headers"))?;
        if line.is_empty() {
            break;
        }
        if headers.len() >= MAX_HEADERS {
            return Err(bad("too many headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(format!("malformed header line: {line:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }

    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: Vec::new(),
        keep_alive: false,
    };

    let connection = req.header("connection").unwrap_or("").to_ascii_lowercase();
    let has_token = |token: &str| connection.split(',').any(|t| t.trim() == token);
    req.keep_alive = if version == "HTTP/1.0" {
        has_token("keep-alive")
    } else {
        !has_token("close")
    };

    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        io.flush().await?;
    }

    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        req.body = read_chunked_body(io).await?;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length: {len:?}")))?;
        if len > MAX_BODY {
            return Err(bad("body too large"));
        }
        let mut body = vec![0; len];
        io.read_exact(&mut body).await?;
        req.body = body;
    }
    Ok(Some(req))
}

async fn read_chunked_body<S: AsyncBufRead + Unpin>(io: &mut S) -> io::Result<Vec<u8>> {
    let eof = || io::Error::new(io::ErrorKind::UnexpectedEof, "eof in chunked body");
    let mut body = Vec::new();
    loop {
        let line = read_line(io).await?.ok_or_else(eof)?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| bad(format!("bad chunk size: {line:?}")))?;
        if size == 0 {
            // Trailer section, ended by an empty line.
            loop {
                let trailer = read_line(io).await?.ok_or_else(eof)?;
                if trailer.is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len().saturating_add(size) > MAX_BODY {
            return Err(bad("body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        io.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        io.read_exact(&mut crlf).await?;
        if &crlf != b"\r\n" {
            return Err(bad("chunk not followed by CRLF"));
        }
    }
}

/// The reason phrase sent with a status code.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn head(status: u16, headers: &[(String, String)], close: bool) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    if close {
        head.push_str("connection: close\r\n");
    }
    head
}

/// Writes a complete response with a `Content-Length` body. `headers` must not contain
/// `content-length`; it is added here.
pub(crate) async fn write_response<W: AsyncWrite + Unpin>(
    io: &mut W,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut out = head(status, headers, close);
    out.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    io.write_all(&bytes).await?;
    io.flush().await
}

/// Writes only the status line and headers (ending the header block), announcing
/// `content-length: declared_len`; the caller then writes (part of) the body itself.
pub(crate) async fn write_head_with_length<W: AsyncWrite + Unpin>(
    io: &mut W,
    status: u16,
    headers: &[(String, String)],
    declared_len: usize,
) -> io::Result<()> {
    let mut out = head(status, headers, false);
    out.push_str(&format!("content-length: {declared_len}\r\n\r\n"));
    io.write_all(out.as_bytes()).await?;
    io.flush().await
}

/// A response body sent with `Transfer-Encoding: chunked`, one HTTP chunk per write.
pub(crate) struct ChunkedBody<'a, W> {
    io: &'a mut W,
    /// The whole response, sent with one write: a scripted answer has no time between its
    /// events, and one syscall instead of one per event keeps the server's CPU use out of the
    /// engine's benchmarks. The client still sees one HTTP chunk per SSE event.
    pending: Vec<u8>,
    /// When non-zero, each chunk is written on its own after waiting this long.
    gap_ms: u64,
}

impl<'a, W: AsyncWrite + Unpin> ChunkedBody<'a, W> {
    /// Starts the response with the status line and headers (plus `transfer-encoding: chunked`).
    pub(crate) async fn start(
        io: &'a mut W,
        status: u16,
        headers: &[(String, String)],
        close: bool,
    ) -> io::Result<Self> {
        let mut out = head(status, headers, close);
        out.push_str("transfer-encoding: chunked\r\n\r\n");
        Ok(Self {
            io,
            pending: out.into_bytes(),
            gap_ms: 0,
        })
    }

    /// Sends each chunk on its own, `gap_ms` after the previous one (builder style).
    pub(crate) fn paced(mut self, gap_ms: u64) -> Self {
        self.gap_ms = gap_ms;
        self
    }

    /// Adds `data` as one HTTP chunk.
    pub(crate) async fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            // An empty chunk would terminate the body.
            return Ok(());
        }
        if self.gap_ms > 0 {
            self.io.write_all(&self.pending).await?;
            self.io.flush().await?;
            self.pending.clear();
            tokio::time::sleep(std::time::Duration::from_millis(self.gap_ms)).await;
        }
        self.pending
            .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        self.pending.extend_from_slice(data);
        self.pending.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Sends what was added without the terminating chunk (a stream cut off mid-way; the
    /// caller then shuts the socket down).
    pub(crate) async fn cut(self) -> io::Result<()> {
        self.io.write_all(&self.pending).await?;
        self.io.flush().await
    }

    /// Sends everything and the terminating zero-length chunk, leaving the connection usable.
    pub(crate) async fn finish(mut self) -> io::Result<()> {
        self.pending.extend_from_slice(b"0\r\n\r\n");
        self.io.write_all(&self.pending).await?;
        self.io.flush().await
    }
}
