"""Speech to instruction text, ROS-free: reading audio (:mod:`.audio`), the offline recognisers
(:mod:`.recognisers`) and turning a transcript into an instruction (:mod:`.transcript`)."""
