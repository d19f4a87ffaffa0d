-- Weights of keys for fair claims: a key of weight w gets up to w jobs per
-- turn (default 1).
create table pgjob.limit_weights (
	queue text not null,
	key text not null,
	weight integer not null,
	constraint limit_weights_check check (((weight >= 1) and (weight <= 1000)))
);

alter table pgjob.limit_weights add constraint limit_weights_pkey primary key (queue, key);
