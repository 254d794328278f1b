"""The SQL front end: a model's Spark SQL compiled into a join plan (`plan`).

`compiler` binds FROM and JOINs and builds the plan, with names resolved in scopes (`scope`),
subqueries in FROM (`derived`) and in WHERE (`subqueries`: semi and anti joins), conditions
split (`conditions`) and placed as keys, pushed filters or residuals (`placement`); interval
joins are recognised from their time bounds (`time_bounds`) and the join strategy is chosen
(`strategy`)."""
