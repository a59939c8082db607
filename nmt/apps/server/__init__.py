"""`nmt serve`: an HTTP translation server that decodes the lines of concurrent requests together.

Requests put their lines on one queue; one engine thread owns the Translator and takes from the queue, in
turns by client, as many lines as a call holds, waiting at most a few milliseconds for other requests to
join, then translates them as one call (the Translator cuts that call into batches by padded tokens). A
request is answered as soon as its own lines are done. The API speaks LibreTranslate's shapes
(`POST /translate`, `GET /languages`, ...), so its clients work unchanged, and nmt's own (`POST /v1/translate`,
answering what `nmt translate --format jsonl` prints).

The rooms: config (ServeSettings, what `nmt serve` is asked for, checked where it is built; the API keys), engine
(the queue and the thread that decodes), limits (what one client may cost: connections, deadlines, bodies,
requests a minute), protocol (the API's shapes), routes (the endpoints and the page), process (the socket,
uvicorn, the stop on SIGTERM).
"""
