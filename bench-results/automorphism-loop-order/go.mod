module autbench

go 1.26
