"""The SQL front end: a model's Spark SQL compiled into a join plan (`compiler`), with interval
joins recognised from their time bounds (`time_bounds`) and the join strategy chosen (`strategy`)."""
