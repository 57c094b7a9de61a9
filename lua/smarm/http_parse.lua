--- HTTP/1.1 message syntax (RFC 9112) as LPeg grammars: request and status lines,
-- header fields, chunk-size lines and trailers. Pure functions over a buffer string and
-- a position, so a connection can feed them whatever it has read so far:
-- every parser answers "here it is" (a value and the position after it), "not yet" (nil,
-- nil: more bytes are needed) or "never" (nil, status: the HTTP status to answer with).
-- They never raise on any input.
local lpeg = require "lpeg"

local P, R, S, C, Cc, Cp, Carg = lpeg.P, lpeg.R, lpeg.S, lpeg.C, lpeg.Cc, lpeg.Cp, lpeg.Carg
local match = lpeg.match
local find, sub, lower, byte = string.find, string.sub, string.lower, string.byte
local tonumber, concat, pairs = tonumber, table.concat, pairs

local M = {}

-- RFC 9110/9112 core rules --------------------------------------------------------------

local DIGIT = R("09")
local ALPHA = R("az", "AZ")
local HEXDIG = R("09", "af", "AF")
local SP = P(" ")
local HTAB = P("\t")
local CRLF = P("\r\n")
local OWS = S(" \t") ^ 0 -- also BWS
local VCHAR = R("\33\126")
local obs_text = R("\128\255")

local tchar = ALPHA + DIGIT + S("!#$%&'*+-.^_`|~")
local token = tchar ^ 1

-- field-value: field-vchars separated by runs of SP/HTAB, no leading or trailing
-- whitespace (that is OWS around it); CR, LF, NUL and other controls never match.
local field_vchar = VCHAR + obs_text
local field_value = (field_vchar ^ 1 * (S(" \t") ^ 1 * field_vchar ^ 1) ^ 0) ^ -1

-- Request target (RFC 9112 section 3.2, URI syntax from RFC 3986) ------------------------

local unreserved = ALPHA + DIGIT + S("-._~")
local pct_encoded = P("%") * HEXDIG * HEXDIG
local sub_delims = S("!$&'()*+,;=")
local pchar = unreserved + pct_encoded + sub_delims + S(":@")
local absolute_path = (P("/") * pchar ^ 0) ^ 1
local query = (pchar + S("/?")) ^ 0
local scheme = ALPHA * (ALPHA + DIGIT + S("+-.")) ^ 0
local authority = (unreserved + pct_encoded + sub_delims + S(":@[]")) ^ 1
local opt_query = P("?") * C(query) + Cc("")

-- each form captures path, query
local origin_form = C(absolute_path) * opt_query
local absolute_form = scheme * P("://") * authority * (C(absolute_path) + Cc("/")) * opt_query
local asterisk_form = C(P("*")) * Cc("")
local authority_form = C(authority) * Cc("") -- CONNECT host:port
local request_target = origin_form + asterisk_form + absolute_form + authority_form

local http_version = P("HTTP/") * C(DIGIT) * P(".") * C(DIGIT)

-- method, path, query, major, minor
local request_line = C(token) * SP * request_target * SP * http_version * CRLF

-- Header fields -----------------------------------------------------------------------

-- Lower-case names of headers seen often, so most requests lower no string.
local lower_names = {}
local lower_count = 0

-- A field line adds name: value to the table passed as match's extra argument; a
-- repeated field is combined into one comma-separated value (RFC 9110 section 5.3).
-- A repeated Host or a Content-Length repeated with another value cannot be combined
-- safely: it marks the table at key false, which the caller turns into 400.
local function lower_key(name)
   local k = lower_names[name]
   if not k then
      k = lower(name)
      if lower_count < 512 then
         lower_names[name] = k
         lower_count = lower_count + 1
      end
   end
   return k
end

local function add_field(h, name, value)
   local k = lower_key(name)
   local old = h[k]
   if old == nil then
      h[k] = value
   elseif k == "host" or (k == "content-length" and old ~= value) then
      h[false] = true
   elseif k ~= "content-length" then
      h[k] = old .. ", " .. value
   end
end

local field_line = (Carg(1) * C(token) * P(":") * OWS * C(field_value) * OWS * CRLF) / add_field
local fields = field_line ^ 0 * CRLF

-- Heads line by line, most lines found in a cache. A client's requests repeat the same
-- lines (its request line, Host, User-Agent, Accept...), and a line's answer depends on
-- its bytes alone: a cut of the line, an interned string, is looked up in a table where the
-- grammar's answer for that line was kept. A line not kept yet is matched with the grammar
-- for one line (a head is a request line, field lines and an empty line, and no line
-- pattern reaches past its CRLF, so line by line is the same grammar). A line the grammar
-- refuses, or a repeated field, leaves the head to the whole grammar, the authority on
-- errors and on combining repeated fields. Cheaper than the whole grammar because LPeg's
-- captures go through the Lua C API and call add_field back once per field. Bounded: a
-- stream of ever-new lines is matched line by line without being kept.
local request_line_at = request_line * Cp()
local field_line_at = C(token) * P(":") * OWS * C(field_value) * OWS * CRLF
local request_lines, field_lines, kept_lines = {}, {}, 0
local MAX_KEPT_LINES = 512

-- The field lines at buf[p..fin-1] added to h: true | nil (a line refused or repeated).
-- A tail call per line rather than a loop: a head has few fields, and LuaJIT compiles no
-- trace through a loop that ends after an iteration or two, so a loop here kept the
-- connection's whole request path in the interpreter.
local function fast_fields(buf, p, fin, h)
   if p >= fin then return true end
   local eol = find(buf, "\r\n", p, true)
   local line = sub(buf, p, eol + 1)
   local f = field_lines[line]
   if not f then
      local name, value = match(field_line_at, buf, p)
      if not name then return nil end
      f = { lower_key(name), value }
      if kept_lines < MAX_KEPT_LINES then
         field_lines[line] = f
         kept_lines = kept_lines + 1
      end
   end
   local k = f[1]
   if h[k] ~= nil then return nil end
   h[k] = f[2]
   return fast_fields(buf, eol + 2, fin, h)
end

-- The request line and fields of the head at buf[start..stop+3] (stop: its CRLF CRLF),
-- fields added to h: method, path, query, major, minor, next | nil (h then holds
-- whatever fields were added: the caller clears it).
local function fast_head(buf, start, stop, h)
   local eol = find(buf, "\r\n", start, true)
   local line = sub(buf, start, eol + 1)
   local rl = request_lines[line]
   if not rl then
      local method, path, q, major, minor = match(request_line_at, buf, start)
      if not method then return nil end
      rl = { method, path, q, major, minor }
      if kept_lines < MAX_KEPT_LINES then
         request_lines[line] = rl
         kept_lines = kept_lines + 1
      end
   end
   if not fast_fields(buf, eol + 2, stop + 2, h) then return nil end
   return rl[1], rl[2], rl[3], rl[4], rl[5], stop + 4
end
M._fast_head = fast_head

-- Whole heads the fast path answered, by their bytes: most connections send the same head
-- again and again (a load generator, a client polling one URL), and one lookup of the
-- head (often the whole of what a recv returned: no cut at all) replaces a find, a cut and
-- a lookup per line. A kept head holds the request line's parts, then the field names and
-- values in turn. Small (each connection actor has its own), emptied when full.
local heads, head_count = {}, 0
local MAX_HEADS, MAX_HEAD_BYTES = 16, 1024

-- The fields kept[i], kept[i + 1]... added to h (tail calls: see fast_fields).
local function fill_fields(h, kept, i)
   local k = kept[i]
   if k == nil then return end
   h[k] = kept[i + 1]
   return fill_fields(h, kept, i + 2)
end

-- Keeps what the fast path answered for head (h: its fields).
local function keep_head(head, method, path, q, major, minor, h)
   if #head > MAX_HEAD_BYTES then return end
   if head_count >= MAX_HEADS then
      heads, head_count = {}, 0
   end
   local kept = { method, path, q or false, major, minor }
   local n = 5
   for k, v in pairs(h) do
      kept[n + 1], kept[n + 2] = k, v
      n = n + 2
   end
   heads[head] = kept
   head_count = head_count + 1
end
function M._head_kept(head) return heads[head] ~= nil end

-- A request head: optional empty lines (RFC 9112 section 2.2 lets a server skip them),
-- the request line, header fields, the empty line.
local empty_lines = CRLF ^ 0 * Cp()
local request_head = request_line * fields * Cp()

-- What a request line can start with while it is still incomplete: a reader that has
-- no CRLF yet but already has a byte no request line allows can answer 400 at once.
local request_line_prefix = (VCHAR + obs_text + SP) ^ 0 * P("\r") ^ -1 * P(-1)

-- Content-Length: 1*DIGIT (RFC 9110 section 8.6)
local content_length = C(DIGIT ^ 1) * P(-1)

-- Host: uri-host [ ":" port ], possibly empty
local host_value = (unreserved + pct_encoded + sub_delims + S(":[]")) ^ 0 * P(-1)

local function has_token(list, tok)
   -- Connection and similar comma lists; case-insensitive whole-element match
   if list == tok then return true end -- "close", the common one: no patterns
   for item in list:gmatch("[^,]+") do
      if lower((item:gsub("^[ \t]+", ""):gsub("[ \t]+$", ""))) == tok then return true end
   end
   return false
end
M.has_token = has_token

--- Parses a request head at buf[pos..].
-- @param max bytes a head may have, leading empty lines included (431 past it)
-- @param grammar_only true to parse with the LPeg grammar alone (tests compare the two)
-- @return req, next: {method, path, query, version (1.0 or 1.1), headers, major, minor,
--     length (Content-Length as a number, or nil), chunked (true for a chunked body)}
--     and the position of the first byte after the head
--   | nil, nil: incomplete, read more
--   | nil, status: 400 malformed, 431 head too large, 501 unknown transfer coding,
--     505 HTTP major version not 1
-- Host values already checked: a connection's requests repeat theirs, and a match costs
-- more than a lookup (strings are interned). Bounded, like lower_names.
local good_hosts, good_host_count = {}, 0

function M.request_head(buf, pos, max, grammar_only)
   -- most requests have no empty lines before them: skip the match then
   local start = pos
   if byte(buf, pos) == 13 then start = match(empty_lines, buf, pos) end
   -- A read that is one whole head kept before ends where that head did (a head is kept
   -- cut at its first CRLF CRLF): no search for the end. A client that waits for each
   -- answer sends one head per read.
   local kept = start == 1 and not grammar_only and heads[buf]
   local stop = kept and #buf - 3 or find(buf, "\r\n\r\n", start, true)
   if not stop then
      -- the request line, if it has ended, must already be valid
      local eol = find(buf, "\r\n", start, true)
      if eol then
         if not match(request_line, buf, start) then return nil, 400 end
      elseif not match(request_line_prefix, buf, start) then
         return nil, 400
      end
      if #buf - pos + 1 > max then return nil, 431 end
      return nil, nil
   end
   -- a head without fields ends its request line with the empty line's CRLF
   if stop + 4 - pos > max then return nil, 431 end
   -- Made with room for a few fields, so that adding them rehashes no table. Modules run
   -- from bytecode dumps, which drop the keys a constructor's template holds for values
   -- computed at run time: only constant values keep a template's size, hence false
   -- (then cleared) here and in req below.
   local h = { host = false, ["user-agent"] = false, accept = false, connection = false }
   h.host, h["user-agent"], h.accept, h.connection = nil, nil, nil, nil
   local method, path, q, major, minor, next
   if not grammar_only then
      local head = buf
      if not kept and not (start == 1 and stop + 3 == #buf) then -- (buf: looked up above)
         head = sub(buf, start, stop + 3)
         kept = heads[head]
      end
      if kept then
         method, path, q, major, minor, next = kept[1], kept[2], kept[3] or nil, kept[4],
            kept[5], stop + 4
         fill_fields(h, kept, 6)
      else
         method, path, q, major, minor, next = fast_head(buf, start, stop, h)
         if method then keep_head(head, method, path, q, major, minor, h) end
      end
   end
   if not method then
      for k in pairs(h) do h[k] = nil end
      method, path, q, major, minor, next = match(request_head, buf, start, h)
   end
   if not method then
      -- the first CRLF CRLF may end the request line itself ("GET / HTTP/1.1\r\n\r\n")
      return nil, 400
   end
   if major ~= "1" then return nil, 505 end
   if h[false] then return nil, 400 end
   local version = minor == "0" and 1.0 or 1.1
   -- (body too, left empty: the connection stores it in that node later, no new key then)
   local req = {
      method = false, path = false, query = false, version = false, headers = false, body = false,
   }
   req.method, req.path, req.query, req.version, req.headers, req.body =
      method, path, q, version, h, nil
   if version == 1.1 and h.host == nil then return nil, 400 end
   local host = h.host
   if host and not good_hosts[host] then
      if not match(host_value, host) then return nil, 400 end
      if good_host_count < 512 then
         good_hosts[host] = true
         good_host_count = good_host_count + 1
      end
   end
   local te, cl = h["transfer-encoding"], h["content-length"]
   if te then
      -- only chunked is supported, and then as the one coding (RFC 9112 section 6.1)
      if cl or version == 1.0 then return nil, 400 end
      if lower(te) ~= "chunked" then return nil, 501 end
      req.chunked = true
   elseif cl then
      local digits = match(content_length, cl)
      if not digits then return nil, 400 end
      -- more than 15 digits cannot be an allowed size; tonumber would round it
      req.length = #digits > 15 and math.huge or tonumber(digits)
   end
   return req, next
end

local whole_token = token * P(-1)
local whole_field_value = field_value * P(-1)

-- Names and short values already found good: a server sends the same few headers with
-- every response. Bounded, like lower_names.
local good_tokens, good_values, good_count = {}, {}, 0

--- Whether s is a token (a valid method or header name).
function M.is_token(s)
   if good_tokens[s] then return true end
   if match(whole_token, s) == nil then return false end
   if good_count < 1024 and #s <= 64 then
      good_tokens[s] = true
      good_count = good_count + 1
   end
   return true
end

--- Whether s can be sent as a header value (no CR, LF or other controls, no leading or
-- trailing whitespace).
function M.is_field_value(s)
   if good_values[s] then return true end
   if match(whole_field_value, s) == nil then return false end
   if good_count < 1024 and #s <= 64 then
      good_values[s] = true
      good_count = good_count + 1
   end
   return true
end

--- The lower-case form of a header name (the parser's cache of them first).
function M.lower_name(name)
   local k = lower_names[name]
   if k then return k end
   return lower(name)
end

-- The grammars only the client and chunked bodies use are built on first use: every
-- connection actor loads this module afresh, and building a pattern costs about a
-- microsecond per operator.

-- URLs for the client: http://host[:port][/path][?query]
local url
local function url_grammar()
   local url_scheme = S("hH") * S("tT") * S("tT") * S("pP") * P("://")
   local url_host = P("[") * C((HEXDIG + S(":.")) ^ 1) * P("]")
      + C((unreserved + pct_encoded + sub_delims) ^ 1)
   local url_port = P(":") * (DIGIT ^ 1 / tonumber) + Cc(80)
   local url_target = C(absolute_path * (P("?") * query) ^ -1) + P("?") * C(query) / function(q)
      return "/?" .. q
   end + Cc("/")
   url = url_scheme * url_host * url_port * url_target * P(-1)
end

--- Splits an http URL.
-- @return host, port, target (path and query) | nil
function M.url(s)
   if not url then url_grammar() end
   local host, port, target = match(url, s)
   if not host or port < 1 or port > 65535 then return nil end
   return host, port, target
end

-- Responses (the client side) -----------------------------------------------------------

local response_head
local function response_grammar()
   local reason_phrase = (HTAB + SP + VCHAR + obs_text) ^ 0
   local status_line = http_version * SP * C(R("19") * DIGIT * DIGIT) * SP * C(reason_phrase)
      * CRLF
   response_head = status_line * fields * Cp()
end

--- Parses a response head at buf[pos..] (same answers as request_head; errors are
-- "bad response" or "response head too large" strings rather than statuses).
-- @return resp {status, reason, version, headers, length, chunked}, next | nil, nil | nil, err
function M.response_head(buf, pos, max)
   if not response_head then response_grammar() end
   local stop = find(buf, "\r\n\r\n", pos, true)
   if not stop then
      if #buf - pos + 1 > max then return nil, "response head too large" end
      return nil, nil
   end
   if stop + 4 - pos > max then return nil, "response head too large" end
   local h = {}
   local major, minor, status, reason, next = match(response_head, buf, pos, h)
   if not major or major ~= "1" or h[false] then return nil, "bad response" end
   local resp = {
      status = tonumber(status), reason = reason, version = minor == "0" and 1.0 or 1.1,
      headers = h,
   }
   local te, cl = h["transfer-encoding"], h["content-length"]
   if te then
      if not has_token(te, "chunked") then return nil, "unsupported transfer coding" end
      resp.chunked = true
   elseif cl then
      local digits = match(content_length, cl)
      if not digits or #digits > 15 then return nil, "bad response" end
      resp.length = tonumber(digits)
   end
   return resp, next
end

-- Chunked bodies (RFC 9112 section 7.1) --------------------------------------------------

local chunk_size_line, chunk_size_prefix, trailer_section
local function chunk_grammar()
   local qdtext = HTAB + SP + P("!") + R("\35\91", "\93\126") + obs_text
   local quoted_pair = P("\\") * (HTAB + SP + VCHAR + obs_text)
   local quoted_string = P('"') * (qdtext + quoted_pair) ^ 0 * P('"')
   local chunk_ext = (OWS * P(";") * OWS * token
      * (OWS * P("=") * OWS * (token + quoted_string)) ^ -1) ^ 0
   chunk_size_line = C(HEXDIG ^ 1) * chunk_ext * CRLF * Cp()
   -- what an incomplete chunk-size line may hold so far
   chunk_size_prefix = (HEXDIG ^ 1 * (VCHAR + obs_text + S(" \t")) ^ 0) ^ -1 * P("\r") ^ -1
      * P(-1)
   trailer_section = ((token * P(":") * OWS * field_value * OWS * CRLF) ^ 0 * CRLF) * Cp()
end

-- longest chunk-size line (with extensions) and trailer section read before giving up
local MAX_SIZE_LINE = 4096
local MAX_TRAILERS = 8192

--- A fresh chunked-body decoder state for chunked().
function M.chunked_state()
   return { phase = 0, left = 0, total = 0, parts = {}, n = 0 }
end

-- phases: 0 chunk-size line, 1 chunk data, 2 the CRLF after the data, 3 trailers
--- Decodes as much of a chunked body at buf[pos..] as is there.
-- @param st a state from chunked_state(), carried between calls
-- @param max most body bytes allowed (413 past it)
-- @return body, next: the whole body and the position after the trailers
--   | nil, nil, next: incomplete; everything before next is consumed (drop it, append
--     more bytes, call again with the same st at the new position)
--   | nil, status: 400 malformed, 413 too large
function M.chunked(st, buf, pos, max)
   if not chunk_size_line then chunk_grammar() end
   local len = #buf
   while true do
      local phase = st.phase
      if phase == 0 then
         local hex, next = match(chunk_size_line, buf, pos)
         if not hex then
            local eol = find(buf, "\r\n", pos, true)
            if eol or len - pos + 1 > MAX_SIZE_LINE then return nil, 400 end
            if not match(chunk_size_prefix, buf, pos) then return nil, 400 end
            return nil, nil, pos
         end
         if #hex > 12 then return nil, 413 end
         local size = tonumber(hex, 16)
         if st.total + size > max then return nil, 413 end
         pos = next
         if size == 0 then
            st.phase = 3
         else
            st.phase, st.left = 1, size
         end
      elseif phase == 1 then
         local avail = len - pos + 1
         if avail <= 0 then return nil, nil, pos end
         local take = st.left < avail and st.left or avail
         local n = st.n + 1
         st.parts[n], st.n = sub(buf, pos, pos + take - 1), n
         st.total = st.total + take
         st.left = st.left - take
         pos = pos + take
         if st.left == 0 then st.phase = 2 end
      elseif phase == 2 then
         if len - pos + 1 < 2 then
            if len >= pos and byte(buf, pos) ~= 13 then return nil, 400 end
            return nil, nil, pos
         end
         if byte(buf, pos) ~= 13 or byte(buf, pos + 1) ~= 10 then return nil, 400 end
         pos = pos + 2
         st.phase = 0
      else
         local next = match(trailer_section, buf, pos)
         if next then
            local body = st.n == 1 and st.parts[1] or concat(st.parts, "", 1, st.n)
            st.parts, st.n = {}, 0
            return body, next
         end
         -- incomplete unless the trailers have ended (or cannot be valid)
         if find(buf, "\r\n\r\n", pos, true) or sub(buf, pos, pos + 1) == "\r\n" then
            return nil, 400
         end
         if len - pos + 1 > MAX_TRAILERS then return nil, 400 end
         return nil, nil, pos
      end
   end
end

return M
