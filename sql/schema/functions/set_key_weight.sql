-- Key weights for fair claims (weight null: back to 1).
create or replace function pgjob.set_key_weight(queue text, key text, weight int)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	if weight is null or weight = 1 then
		delete from pgjob.limit_weights w where w.queue = queue and w.key = key;
	else
		-- By the constraint's name: under use_variable, a target
		-- (queue, key) would name the parameters, not the columns.
		insert into pgjob.limit_weights as w values (queue, key, weight)
		on conflict on constraint limit_weights_pkey
		do update set weight = excluded.weight;
	end if;
end
$$;
