-- Who may call what; applied last, on a fresh install and after every
-- upgrade (sql/README.md).
--
-- PostgreSQL grants EXECUTE on every new function to PUBLIC.  PUBLIC keeps
-- it only on the functions applications call with their own rights
-- (docs/security.md, "Functions any role may call", which
-- tests/integration/test_privileges.c compares with a fresh schema); the
-- worker role has every function (its grant on all functions in the
-- schema), and the enqueue role those granted to it by name.  So a
-- function added to sql/schema/functions/ is taken from PUBLIC here
-- without a line of its own; one that PUBLIC may call is added to the
-- grant below (and to docs/security.md).
--
-- Grants to other roles are the operator's (docs/security.md): this file
-- neither gives nor takes them, so an upgrade keeps them.
revoke execute on all functions in schema pgjob from public;
grant execute on function pgjob.fence(text, bigint),
	pgjob.request_begin(text, text, text, interval, boolean),
	pgjob.request_take(text, text, text, interval),
	pgjob.request_take_nowait(text, text, text, interval),
	pgjob.request_finish(text, jsonb, int, text)
	to public;
