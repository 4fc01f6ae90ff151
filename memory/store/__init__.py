"""What a memory is and who may touch it: versioned memories and their events, the read and write rules
(visibility, audiences, the role table), the search projection and vector backlog derived from them, tenant
policies and retention."""
